"""Blocks indented where Python expects no indent, mended before they run (:mod:`.indentation`)."""

from __future__ import annotations

import ast

import pytest

from kernel_analyst.agent.feedback.indentation import mended_indentation


@pytest.mark.parametrize(("code", "expected", "lines"), [
    # the mpg conversation's block: everything after the first line indented
    ("df = df[df.origin == 'europe']\n    print(len(df[df.mpg > 30]))",
     "df = df[df.origin == 'europe']\nprint(len(df[df.mpg > 30]))", (2,)),
    # a loop under the wrongly indented line keeps its own body's indentation
    ("x = [1, 2]\n    for i in x:\n        print(i)\n    print('done')",
     "x = [1, 2]\nfor i in x:\n    print(i)\nprint('done')", (2,)),
    # inside a block: back to the block's depth, not to the margin
    ("if True:\n    a = 1\n        b = 2\n    c = 3", "if True:\n    a = 1\n    b = 2\n    c = 3", (3,)),
    # the line above is a statement over several lines: its first line sets the depth
    ("x = [1,\n      2]\n    y = 3", "x = [1,\n      2]\ny = 3", (3,)),
    # comments and blank lines between do not count as the line above
    ("a = 1\n\n# then\n    b = 2", "a = 1\n\n# then\nb = 2", (4,)),
    # two separate mends
    ("a = 1\n  b = 2\nc = 3\n    d = 4", "a = 1\nb = 2\nc = 3\nd = 4", (2, 4)),
])
def test_unexpected_indents_are_moved_back(code: str, expected: str, lines: tuple[int, ...]) -> None:
    mended = mended_indentation(code)
    assert mended is not None and mended.code == expected and mended.lines == lines
    ast.parse(mended.code)


@pytest.mark.parametrize("code", [
    "a = 1\nprint(a)",  # parses already
    "def f(:\n    pass",  # another syntax error
    "for i in range(3):\n        print(i)\n      print(2)",  # a dedent that matches no level
    "%matplotlib inline\nx = 1\n    y = 2",  # IPython syntax: not mended here
    "    x = 1\n    y = 2",  # indented as a whole: IPython takes the common indent off itself
])
def test_other_code_is_left_as_it_is(code: str) -> None:
    assert mended_indentation(code) is None


def test_the_lines_are_named_as_a_reader_says_them() -> None:
    one = mended_indentation("a = 1\n  b = 2")
    two = mended_indentation("a = 1\n  b = 2\nc = 3\n    d = 4\ne = 5\n  f = 6")
    assert one is not None and one.named() == "line 2"
    assert two is not None and two.named() == "lines 2, 4 and 6"
