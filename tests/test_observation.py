"""What the model sees of an Execution: budgets, errors, figures, lost state (no kernel)."""

from __future__ import annotations

import base64
import struct
import zlib

from kernel_analyst.agent.tools.observation import elide, observe, png_size, trim_traceback
from kernel_analyst.kernels import Execution, ExecutionError, VariableChanges, VariableInfo


def tiny_png(width: int = 3, height: int = 2) -> bytes:
    """A PNG signature and header (enough for size detection)."""
    header = struct.pack(">II", width, height) + b"\x08\x02\x00\x00\x00"
    chunk = b"IHDR" + header
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))


def stream(text: str, name: str = "stdout") -> dict[str, object]:
    return {"output_type": "stream", "name": name, "text": text}


def figure(png: bytes) -> dict[str, object]:
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(png).decode(), "text/plain": "<Figure size 640x480>"}}


# A chained KeyError as ipykernel reports `df['zz']` (ANSI codes and all).
CHAINED_TRACEBACK = [
    "\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
    "\x1b[0;31mKeyError\x1b[0m                                  Traceback (most recent call last)",
    "File /opt/venv/lib/python3.11/site-packages/pandas/core/indexes/base.py:3816, in Index.get_loc"
    "(self, key)\n   3815 try:\n-> 3816     return self._engine.get_loc(casted_key)\n"
    "   3817 except KeyError:\n",
    "File pandas/_libs/index.pyx:172, in pandas._libs.index.IndexEngine.get_loc()\n",
    "KeyError: 'zz'",
    "\nThe above exception was the direct cause of the following exception:\n",
    "KeyError                                  Traceback (most recent call last)",
    "Cell In[2], line 1\n----> 1 df['zz']\n",
    "File /opt/venv/lib/python3.11/site-packages/pandas/core/frame.py:4330, in DataFrame.__getitem__"
    "(self, key)\n   4329             return self._getitem_multilevel(key)\n-> 4330             indexer = "
    "self.columns.get_loc(key)\n   4331             if is_integer(indexer):\n",
    "File /opt/venv/lib/python3.11/site-packages/pandas/core/indexes/base.py:3823, in Index.get_loc"
    "(self, key)\n   3821     ):\n   3822         raise InvalidIndexError(key) from err\n-> 3823     "
    "raise KeyError(key) from err\n   3824 except TypeError:\n   3825     # comment\n",
    "KeyError: 'zz'",
]


def test_short_output_is_shown_whole_with_a_variables_note() -> None:
    ex = Execution(code="x = 1", outputs=[stream("hello\n")], variables=VariableChanges(
        created=[VariableInfo("df", "pandas.DataFrame", shape=[891, 15])], deleted=["tmp"]))
    obs = observe(ex)
    assert obs.text == "hello\nVariables: created df: pandas.DataFrame (891, 15); deleted tmp"
    assert obs.elided_chars == 0 and obs.saved is None and obs.content() == obs.text


def test_no_output_is_said_only_when_nothing_failed() -> None:
    assert observe(Execution(code="x = 1")).text == "(no output)"
    err = ExecutionError("NameError", "name 'y' is not defined", ["NameError: name 'y' is not defined"])
    assert observe(Execution(code="y", status="error", error=err)).text.startswith("Error: NameError")


def test_long_output_keeps_head_and_tail_and_saves_the_rest() -> None:
    full = "".join(f"line {i:04d}\n" for i in range(2000))
    obs = observe(Execution(code="...", outputs=[stream(full)]), budget=1000, save_as="outputs/s1.txt")
    assert len(obs.text) <= 1000
    assert obs.text.startswith("line 0000\n") and obs.text.endswith("line 1999")
    kept = obs.text.split("\n")
    assert all(len(line) == 9 for line in kept if line.startswith("line"))  # cuts on line breaks
    marker = f"... [{obs.elided_chars:,} characters elided; the full output is in the file outputs/s1.txt]"
    assert marker in obs.text
    shown = sum(len(line) + 1 for line in kept if line.startswith("line"))
    assert obs.elided_chars == len(full) - shown
    assert obs.saved is not None and obs.saved.data.decode() == full


def test_elide_counts_exactly_without_a_file() -> None:
    text = "x" * 5000
    shown, count = elide(text, 600)
    assert count == 5000 - shown.count("x") and len(shown) <= 600
    assert shown.startswith("x") and shown.endswith("x") and "[4,4" in shown and "file" not in shown
    assert elide("short", 600) == ("short", 0)


def test_dataframes_as_plain_text_never_html() -> None:
    out = {"output_type": "execute_result", "execution_count": 3, "metadata": {},
           "data": {"text/plain": "   a\n0  1", "text/html": "<table><tr><td>1</td></tr></table>"}}
    html_only = {"output_type": "display_data", "metadata": {}, "data": {"text/html": "<b>hi</b>"}}
    text = observe(Execution(code="df", outputs=[out, html_only])).text
    assert text == "   a\n0  1\n[text/html output, not shown as text]"


def test_streams_lose_ansi_codes() -> None:
    assert observe(Execution(code="", outputs=[stream("\x1b[31mred\x1b[0m\n", "stderr")])).text == "red"


def test_chained_traceback_trimmed_to_user_frame_and_raiser() -> None:
    frames, omitted = trim_traceback(CHAINED_TRACEBACK)
    assert omitted == 1  # DataFrame.__getitem__, between the cell and the raising frame
    assert frames[0] == "Cell In[2], line 1\n----> 1 df['zz']"
    assert frames[1] == "   ..."
    assert frames[2] == ("File pandas/core/indexes/base.py:3823, in Index.get_loc(self, key)\n"
                         "   3822         raise InvalidIndexError(key) from err\n"
                         "-> 3823     raise KeyError(key) from err")
    assert frames[3] == "KeyError: 'zz'" and len(frames) == 4


def test_error_shown_whole_before_long_output() -> None:
    err = ExecutionError("KeyError", "'zz'", CHAINED_TRACEBACK)
    ex = Execution(code="...", status="error", error=err, outputs=[stream("noise\n" * 3000)])
    obs = observe(ex, budget=1500)
    assert len(obs.text) <= 1500
    error_part = obs.text[obs.text.index("Error: KeyError: 'zz'"):]
    assert error_part.splitlines()[1] == "Traceback (trimmed; 1 library frames omitted):"
    assert error_part.endswith("KeyError: 'zz'") and "elided" not in error_part
    assert obs.text.startswith("noise\n") and "characters elided" in obs.text


def test_syntax_error_keeps_its_caret() -> None:
    tb = ["  Cell In[3], line 1\n    x = (\n         ^\nSyntaxError: incomplete input\n"]
    err = ExecutionError("SyntaxError", "incomplete input (3412436.py, line 1)", tb)
    text = observe(Execution(code="x = (", status="error", error=err)).text
    assert text.splitlines()[1:] == ["Traceback:", "  Cell In[3], line 1", "    x = (", "         ^",
                                     "SyntaxError: incomplete input"]


def test_figures_are_named_not_dumped_when_images_are_off() -> None:
    ex = Execution(code="plot", outputs=[figure(tiny_png(3, 2))])
    obs = observe(ex)
    assert obs.text == "[figure 1: 3x2 PNG; not shown to you, kept in the notebook]"
    assert obs.images == [] and obs.content() == obs.text


def test_figures_become_image_blocks_up_to_the_limit() -> None:
    pngs = [tiny_png(i + 1, 1) for i in range(3)]
    obs = observe(Execution(code="plots", outputs=[figure(p) for p in pngs]), send_images=True, max_images=2)
    assert obs.images == pngs[:2]
    assert obs.text.splitlines() == ["[figure 1: 1x1 PNG; attached as an image]",
                                     "[figure 2: 2x1 PNG; attached as an image]",
                                     "[figure 3: 3x1 PNG; not shown to you, kept in the notebook]"]
    content = obs.content()
    assert isinstance(content, list) and content[0] == {"type": "text", "text": obs.text}
    assert content[1] == {"type": "image", "mime_type": "image/png",
                          "base64": base64.b64encode(pngs[0]).decode()}
    assert png_size(b"not a png") is None


def test_death_names_the_lost_variables() -> None:
    ex = Execution(code="os._exit(1)", status="died", state="lost", events=["kernel died"])
    lines = observe(ex, lost_variables=["x", "df"]).text.splitlines()
    assert lines[0].startswith("The kernel died while running this code")
    assert lines[1].startswith("All variables from earlier steps were lost: df, x. Files")
    assert len(lines) == 2


def test_death_while_idle_still_shows_the_new_output() -> None:
    ex = Execution(code="print(1)", state="lost", outputs=[stream("1\n")],
                   events=["kernel died while idle; restarted"])
    lines = observe(ex).text.splitlines()
    assert lines[0].startswith("The kernel had died before this code ran")
    assert lines[1].startswith("All variables from earlier steps were lost. Files")
    assert lines[2] == "1"


def test_timeouts_say_whether_the_state_survived() -> None:
    kept = observe(Execution(code="sleep", status="timeout", duration_s=2.04)).text
    assert kept.startswith("The code was stopped at the time limit after 2.0 s (interrupted). The kernel")
    lost = observe(Execution(code="spin", status="timeout", state="lost", duration_s=3.0),
                   lost_variables=[]).text
    assert "did not stop when interrupted, so the kernel was restarted" in lost
    assert "All variables from earlier steps were lost. Files" in lost


def test_dropped_output_is_reported() -> None:
    text = observe(Execution(code="spam", outputs=[stream("a\n")], truncated_bytes=123456)).text
    assert text.endswith("Note: 123,456 bytes of output were dropped by the kernel's output limit.")


def test_observation_round_trips_to_dict() -> None:
    obs = observe(Execution(code="", outputs=[stream("z" * 3000)]), budget=1000, save_as="o.txt")
    assert obs.to_dict() == {"text": obs.text, "images": 0, "saved": {"name": "o.txt", "size": 3000},
                             "elided_chars": obs.elided_chars}
