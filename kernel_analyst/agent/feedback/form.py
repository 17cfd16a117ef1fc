"""The form a question asks its answer in, and whether an answer follows it.

Questions often say how the answer must be written: a template (``@mean_fare[value]``,
as DABench writes them), a number of decimals. A small model computes the right numbers
and then restates them as prose, which a reader (or a scorer) that expects the template
cannot use. :meth:`AnswerForm.problems` names what an answer misses, for the review's
one feedback message:

- every ``@name[...]`` of the question must appear in the answer as ``@name[value]``;
- where the question gives a number of decimals, a value inside a template has no more
  than that many;
- a value that only stands for one (``@r[r_value]``, ``@mean[value]``, ``@x[<x>]``: the
  template's own placeholder copied) is no value;
- where the question names the words a verdict is written in ("Yes" or "No", True or
  False), a verdict in the other pair is not its form (DABench easy 19: ``@is_normal[False]``
  for "Yes" or "No").
- where the question lists the values a string item is written in (``"linear",
  "nonlinear", or "none"``; ``[significant/no significant]``), a value that is none of them
  is not its form, and one spelled otherwise (``Not Normal`` for ``not_normal``) is written
  as offered (:meth:`AnswerForm.spelled`).

:meth:`AnswerForm.complete` fills the templates an answer lacks from what the question's
cells printed in the form (``@skewness[-0.03]`` on a cell's output), or on a line that
names the item as its label (``Significance of difference: no`` for
``@significance_of_difference[...]``, DABench hard 124; ``R-squared: 0.705`` for
``@r_squared``, hard 125): a small model often prints the items, then answers in prose.
A value the question does not offer completes nothing, nor a verdict printed by a step that
left a NaN number; an offered value the answer's prose says does (``... is not normally
distributed``).

Units and list shapes are not checked: the ways to write them are too many to judge
without a model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_TEMPLATE_RE = re.compile(r"@(\w+)\[")
_ANSWER_RE = re.compile(r"@(\w+)\[(.*?)\]")
_NAMED_ITEM_RE = re.compile(r"(?:^|_)(?:name|country|city|state|region|category|type|class|label|title)s?$",
                            re.I)
"""An item whose value is a name, not a number (``@country_name[...]``)."""
_NUMBER_ONLY_RE = re.compile(r"^\s*-?\d[\d,]*(?:\.\d+)?\s*$")
_CODE_RE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
"""Code in an answer (fenced, or inline): a template inside it is code that prints the
form, not the answer written in it."""
_FENCED_RE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
"""Fenced code alone (an item's name in the prose is often inline code)."""
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_DECIMALS_RE = re.compile(r"\b(?:to|with|at)\s+(\d|one|two|three|four|five|six)\s+decimal(?:\s+places?|s)?\b",
                          re.IGNORECASE)
_DECIMAL_NUMBER_RE = re.compile(r"-?\d+\.(\d+)")
_PLACEHOLDER_RE = re.compile(r"^\s*(?:<[^>]*>|\{[^}]*\}|\.\.\.|\w*value\w*|val|number|x|\?+)\s*$",
                             re.IGNORECASE)
"""A template's placeholder copied as the value: ``value``, ``r_value``, ``<x>``, ``{mean}``."""
_VERDICT_WORDS = ("yes", "no", "true", "false")
_WORD_PAIR_RE = re.compile(r"""(?<![\w'"])["']?(yes|no|true|false)["']?\s*(?:,?\s*or|/)\s*"""
                           r"""["']?(yes|no|true|false)\b""", re.IGNORECASE)
"""Two verdict words the question offers: ``"Yes" or "No"``, ``True or False``, ``yes/no``."""
_LABELLED_RE = re.compile(r"^[ \t]*([A-Za-z][\w \-]{0,60}?)[ \t]*[:=][ \t]*([^\s@].{0,80}?)[ \t]*$", re.M)
"""A printed line that names a value (``Significance of difference: no``)."""
_OFFERED_RE = re.compile(r"""\b(?:(?:can|could|should|must)\s+(?:either\s+)?be(?:\s+either)?|"""
                         r"""either(?:\s+of\s+the\s+exact\s+values)?|one\s+of)\s*:?\s*"""
                         r"""("[^"]+"(?:\s*,?\s*(?:or\s+)?"[^"]+")+)""", re.IGNORECASE)
"""The values a string item is written in, as the question lists them (``can either be
"linear", "nonlinear", or "none"``)."""
_SUBJECT_RE = re.compile(r"""((?:"[^"]+"|\b\w+)(?:\s*(?:,\s*(?:and\s+)?|and\s+)"[^"]+")*)"""
                         r"""\s+(?:is|are|a|should\s+be)\s+(?:a\s+)?"""
                         r"""strings?\b""", re.IGNORECASE)
"""What a listing of values is about: ``"dist_dem" and "dist_gop" are strings``."""
_QUOTED_RE = re.compile(r'"([^"]+)"')
_SLASHED_RE = re.compile(r"(?:^|\()\s*((?:[A-Za-z]+(?: [A-Za-z]+){0,2})"
                         r"(?:\s*/\s*[A-Za-z]+(?: [A-Za-z]+){0,2})+)\s*(?:\)|$)")
"""Values offered in the brackets, a slash between them: ``@significance[significant/no
significant]``, ``@significance[Is there a significant difference(Yes/No)]``."""
_GENERIC = frozenset({"name"})
"""Template names that describe the form rather than ask for an answer ("write each
@name[value] as shown", as DABench's prompt says)."""


_SENTENCE_RE = re.compile(r"(?<=[.;])\s+|\n+")
_TEMPLATE_VALUE_RE = re.compile(r"@(\w+)\[([^\]]*)\]")
_VAGUE = frozenset({"value", "values", "number", "name", "string", "x", "val"})
"""Placeholder words too common to tell one template's sentence from another's."""


def _places(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word.lower()]


def _item_places(question: str, names: tuple[str, ...], found: list[int]) -> tuple[tuple[str, int], ...]:
    """The decimals of each template that a sentence names with them: the template's name or
    a word of its placeholder (``"p_value" is a number between 0 and 1, rounded to four
    decimal places`` for ``@p_value[p_value]``). Only where the question names more than one
    number of decimals (otherwise that one is every item's)."""
    if len(set(found)) < 2:
        return ()
    words = {name: {name.lower()} for name in names}
    for name, placeholder in _TEMPLATE_VALUE_RE.findall(question):
        if name in words:
            words[name] |= {w.lower() for w in re.findall(r"\w+", placeholder) if w.lower() not in _VAGUE}
    shared = {w for w in set().union(*words.values()) if sum(w in ws for ws in words.values()) > 1} \
        if words else set()
    places: dict[str, int] = {}
    for sentence in _SENTENCE_RE.split(_TEMPLATE_VALUE_RE.sub(" ", question)):
        start = 0
        for said in _DECIMALS_RE.finditer(sentence):  # each phrase goes with the words before it
            named = {w.lower() for w in re.findall(r"\w+", sentence[start:said.end()])}
            start = said.end()
            for name, own in words.items():
                if (own - shared) & named:
                    places.setdefault(name, _places(said.group(1)))
    return tuple(places.items())


def _items_replaced(answer: str, replace: Callable[[re.Match[str]], str]) -> str:
    """The answer with each ``@name[value]`` item outside code replaced by ``replace``: code
    that prints the form is left as written."""
    parts, end = [], 0
    for code in _CODE_RE.finditer(answer):
        parts += [_ANSWER_RE.sub(replace, answer[end:code.start()]), code.group(0)]
        end = code.end()
    return "".join([*parts, _ANSWER_RE.sub(replace, answer[end:])])


def _listed(values: tuple[str, ...]) -> str:
    """``"a", "b" or "c"``."""
    quoted = [f'"{v}"' for v in values]
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _item_choices(question: str, names: tuple[str, ...],
                  placeholders: dict[str, str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The values each string item is to be written in, where the question lists them: in the
    item's brackets (``@normality_test_result[A string that should be either "Normal" or "Not
    Normal"]``, ``[significant/no significant]``), or in a sentence about its name or
    placeholder (``"decision" is a string with either of the exact values: "normally
    distributed" or "not normally distributed"`` for ``@normality_decision[decision]``). A
    scorer compares these words exactly. ``placeholders``: each item's brackets."""
    choices: dict[str, tuple[str, ...]] = {}
    for name, placeholder in placeholders.items():
        if offered := _OFFERED_RE.search(placeholder):
            choices[name] = tuple(_QUOTED_RE.findall(offered.group(1)))
        elif slashed := _SLASHED_RE.search(placeholder):
            choices[name] = tuple(v.strip() for v in slashed.group(1).split("/"))
    for sentence in _SENTENCE_RE.split(_TEMPLATE_VALUE_RE.sub(" ", question)):
        for offered in _OFFERED_RE.finditer(sentence):
            before = sentence[:offered.start()]
            subjects = list(_SUBJECT_RE.finditer(before))
            if subjects:
                said = subjects[-1].group(1)
                about = _QUOTED_RE.findall(said) or [said]
            else:
                about = _QUOTED_RE.findall(before)[-1:]
            keys = {_label_key(word) for word in about}
            for name in names:
                placeholder = _label_key(placeholders.get(name, ""))
                if name not in choices and (_label_key(name) in keys or placeholder in keys or any(
                        key and placeholder.startswith(key) for key in keys)):
                    choices[name] = tuple(_QUOTED_RE.findall(offered.group(1)))
    return tuple((name, values) for name, values in choices.items() if len(values) > 1)


def _label_key(label: str) -> str:
    """A name, a printed label or an offered value as they are compared: ``Significance of
    difference`` and ``significance_of_difference`` alike, ``Not Normal`` and ``not_normal``."""
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def is_placeholder(value: str) -> bool:
    """True for a template's placeholder copied as a value (``value``, ``r_value``, ``<x>``)."""
    return _PLACEHOLDER_RE.match(value) is not None


@dataclass(frozen=True)
class AnswerForm:
    """What a question says about how its answer is written."""

    names: tuple[str, ...] = ()
    """The ``@name[...]`` templates it gives, in order."""
    decimals: int | None = None
    """The decimals it asks values to be rounded to, when it says (the smallest it names)."""
    words: tuple[str, ...] = ()
    """The verdict words it offers (``Yes``, ``No``), as it writes them; none: it names none."""
    places: tuple[tuple[str, int], ...] = ()
    """The decimals of each template the question names them for (:meth:`decimals_of`)."""
    mixed: bool = False
    """The question names more than one number of decimals."""
    choices: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """The values each string item is written in, where the question lists them
    (:func:`_item_choices`)."""
    placeholders: tuple[tuple[str, str], ...] = ()
    """What each template's brackets hold in the question (``country_name`` of
    ``@country_with_highest_average[country_name]``)."""

    @classmethod
    def of(cls, question: str) -> AnswerForm:
        """Read the form from the question's text."""
        names = tuple(dict.fromkeys(n for n in _TEMPLATE_RE.findall(question) if n not in _GENERIC))
        found = [_places(m) for m in _DECIMALS_RE.findall(question)]
        words = tuple(dict.fromkeys(w for pair in _WORD_PAIR_RE.findall(question) for w in pair)
                      if names else ())
        placeholders = {n: p for n, p in _TEMPLATE_VALUE_RE.findall(question) if n in names}
        return cls(names, min(found) if found else None, words, _item_places(question, names, found),
                   len(set(found)) > 1, _item_choices(question, names, placeholders),
                   tuple(placeholders.items()))

    def offered(self, name: str, value: str) -> str | None:
        """``value`` as the question writes it among item ``name``'s values (``Not Normal``
        for ``not_normal``); None: not one of them. The value itself where the question lists
        none."""
        values = dict(self.choices).get(name)
        if values is None:
            return value
        return next((v for v in values if _label_key(v) == _label_key(value)), None)

    def decimals_of(self, name: str) -> int | None:
        """The decimals item ``name`` is to be rounded to: those the sentence that names it
        (or its placeholder) gives, or else the question's only number of decimals; None when
        the question names several and none for this item (DABench medium 34: "r_value ...
        rounded to two decimal places. "p_value" ... rounded to four": 0.4058 was rounded to
        two, the smallest of them)."""
        own = dict(self.places)
        if name in own:
            return own[name]
        return None if self.mixed else self.decimals

    @property
    def template(self) -> str:
        """The templates as the answer should write them (``@a[value], @b[value]``)."""
        return ", ".join(f"@{name}[value]" for name in self.names)

    def problems(self, answer: str) -> list[str]:
        """What the answer misses of the form: the templates it lacks, the values with
        more decimals than asked (empty when it follows the form, or none is given)."""
        if not self.names:
            return []
        given = self.given(answer)
        missing = self.missing(answer)
        if missing:
            placeholders = [f"@{n}[{given[n]}]" for n in missing if n in given]
            found = [f"missing: {', '.join(f'@{n}[...]' for n in missing if n not in given)}"] \
                if len(placeholders) < len(missing) else []
            return found + ([f"placeholders, not values: {', '.join(placeholders)}"] if placeholders else [])
        offered = {w.lower() for w in self.words}
        other = [f"@{name}[{value}]" for name, value in given.items() if name in self.names
                 and value.strip().lower() in _VERDICT_WORDS and value.strip().lower() not in offered]
        if offered and other:
            said = " or ".join(f'"{w}"' for w in self.words)
            return [f"the question writes the verdict as {said}, not {', '.join(other)}"]
        stray = [(f"@{name}[{value}]", dict(self.choices)[name]) for name, value in given.items()
                 if name in self.names and self.offered(name, value) is None]
        if stray:
            return ["not among the values the question offers: " + "; ".join(
                f"{item} (the question offers {_listed(values)})" for item, values in stray)]
        long = [(f"@{name}[{value}]", places) for name, value in given.items() if name in self.names
                and (places := self.decimals_of(name)) is not None
                and any(len(m.group(1)) > places for m in _DECIMAL_NUMBER_RE.finditer(value))]
        if not long:
            return []
        fewest = min(places for _, places in long)
        return [f"more than {fewest} decimals: {', '.join(item for item, _ in long)}"]

    @staticmethod
    def given(answer: str) -> dict[str, str]:
        """The answer's ``@name[value]`` items (outside code), the last of a name kept."""
        return dict(_ANSWER_RE.findall(_CODE_RE.sub(" ", answer)))

    def missing(self, answer: str) -> list[str]:
        """The template names the answer lacks a value for (absent, or a placeholder)."""
        given = self.given(answer)
        return [name for name in self.names if name not in given or _PLACEHOLDER_RE.match(given[name])]

    def rounded(self, answer: str) -> str:
        """The answer with each number inside its templates rounded to the decimals the
        question asks, where it has more (DABench easy 218: ``@correlation_coefficient
        [0.08133301638819802]`` for "rounded to two decimal places", sent back for its
        decimals, and the 1.5B model ran its cell five more times instead of rounding; the
        citation still shows the cell's value and says "rounded")."""
        if self.decimals is None or not self.names:
            return answer

        def round_item(match: re.Match[str]) -> str:
            name, value = match.group(1), match.group(2)
            places = self.decimals_of(name) if name in self.names else None
            if places is None:
                return match.group(0)

            def round_number(number: re.Match[str]) -> str:
                long = len(number.group(1)) > places
                return f"{float(number.group(0)):.{places}f}" if long else number.group(0)

            return f"@{name}[{_DECIMAL_NUMBER_RE.sub(round_number, value)}]"

        return _items_replaced(answer, round_item)

    def spelled(self, answer: str) -> str:
        """The answer with each item's value written as the question offers it, where it is one
        of them but spelled otherwise (``@normality_test[Not Normal]`` for "normal" or
        "not_normal": ``not_normal``); a scorer compares these words exactly."""
        if not self.choices:
            return answer

        def spell(match: re.Match[str]) -> str:
            name, value = match.group(1), match.group(2)
            as_offered = self.offered(name, value) if name in self.names else None
            return match.group(0) if as_offered is None else f"@{name}[{as_offered}]"

        return _items_replaced(answer, spell)

    def complete(self, answer: str, printed: list[tuple[int | None, str]],
                 nan_cells: frozenset[int] = frozenset()) -> tuple[str, list[int | None]]:
        """The answer with the templates it lacks filled from ``printed`` (each cell's number
        and output text, oldest first; the latest value of a name wins), and the cells used.
        The answer is returned as it is when nothing it lacks was printed in the form. A cell
        in ``nan_cells`` (its step left a NaN number) gives no value that is not a number:
        a verdict from NaN is false (``nan < 0.05`` is False; DABench hard 109: a t-test on a
        column with gaps printed "no significant", and the answer's prose said significant)."""
        missing = self.missing(answer)
        values: dict[str, tuple[int | None, str]] = {}
        labelled: dict[str, tuple[int | None, str]] = {}
        by_label = {_label_key(name): name for name in missing}
        for cell, text in printed:
            numbers_only = cell in nan_cells
            for name, value in _ANSWER_RE.findall(text):
                if name in missing and self._is_value(name, value, numbers_only):
                    values[name] = (cell, value.strip())
            for label, value in _LABELLED_RE.findall(text):
                name = by_label.get(_label_key(label))
                if name is not None and self._is_value(name, value, numbers_only):
                    labelled[name] = (cell, value.strip())
        values = labelled | values  # an item printed in the form wins over a labelled line
        if not values and len(missing) == 1 and len(self.names) == 1:
            values = self._value_as_name(missing[0], printed)
        said = {name: value for name in missing if name not in values
                and (value := self._said(name, answer)) is not None}
        if not values and not said:
            return answer, []
        items = " ".join(f"@{name}[{values[name][1]}]" if name in values else f"@{name}[{said[name]}]"
                         for name in missing if name in values or name in said)
        cells = list(dict.fromkeys(values[name][0] for name in missing if name in values))
        return f"{answer.rstrip()}\n\n{items}", cells

    def _is_value(self, name: str, value: str, numbers_only: bool = False) -> bool:
        """A printed value can be item ``name``'s: no placeholder, one of the values the
        question offers it, if it offers any (not a cell's ``1.0`` for "normally distributed" or
        "not normally distributed"), and a number where ``numbers_only``."""
        return (not _PLACEHOLDER_RE.match(value) and self.offered(name, value.strip()) is not None
                and (not numbers_only or _NUMBER_ONLY_RE.match(value) is not None))

    def _said(self, name: str, answer: str) -> str | None:
        """The value the answer's prose gives item ``name``: the one number it states for the
        item by its exact name, a name with an underscore or in backticks (``The
        `mean_fare_child` is 31.54.``: DABench medium 6 with the 1.5B model, a partial answer
        with every item so stated and none in the form); or, for an item with values offered,
        the one of them the prose says (``... is not normally distributed`` for "normally
        distributed" or "not normally distributed": a value inside a longer one it says is not
        counted; DABench easy 33, where a cell's ``1.0`` was taken for the item). None: it says
        none or several, or the values are verdict words (``no`` is in too many sentences)."""
        prose = _CODE_RE.sub(" ", _ANSWER_RE.sub(" ", answer))
        named = _FENCED_RE.sub(" ", _ANSWER_RE.sub(" ", answer))  # an item's name is inline code
        quoted = "`?" if "_" in name else "`"  # a plain word (``mean``) may name something else
        statement = (rf"(?<![\w@]){quoted}{re.escape(name)}{quoted}\s*(?:is|was|=|:)"
                     r"\s*`?(-?\d+(?:\.\d+)?(?:e-?\d+)?)(?![\d.]*\d)")
        stated = {m.group(1) for m in re.finditer(statement, named)}
        if len(stated) == 1 and name not in dict(self.choices):
            return stated.pop()
        values = dict(self.choices).get(name, ())
        if any(v.lower() in _VERDICT_WORDS for v in values):
            return None
        spans = [(m.start(), m.end(), value) for value in values for m in re.finditer(
            r"(?<![\w-])" + r"[\s_-]+".join(map(re.escape, re.split(r"[\s_-]+", value))) + r"(?![\w-])",
            prose, re.IGNORECASE)]
        found = {value for start, end, value in spans
                 if not any(s <= start and end <= e and (s, e) != (start, end) for s, e, _ in spans)}
        return found.pop() if len(found) == 1 else None

    def _value_as_name(self, name: str,
                       printed: list[tuple[int | None, str]]) -> dict[str, tuple[int | None, str]]:
        """The one item asked for, printed with its value where its name goes: ``@Congo[965200]``
        for ``@country_name[country]`` (DABench easy 59 with the 1.5B model: the cell's
        ``print(f"@{country}[{cases}]")``, the answer the same, sent back and insisted on). Only
        for a form of one item whose value is a name (not a number), and one such item printed,
        a word with a number in its brackets (not another item, ``@mean_cases[12]``). The value
        is a name where the item's name or its placeholder says so (DABench easy 123:
        ``@country_with_highest_average_daily_vaccinations[country_name]``, an attempt's cell
        printed ``@Gibraltar[21999.73]``)."""
        if not (_NAMED_ITEM_RE.search(name) or _NAMED_ITEM_RE.search(dict(self.placeholders).get(name, ""))):
            return {}
        found = {(cell, other) for cell, text in printed for other, number in _ANSWER_RE.findall(text)
                 if other not in self.names and "_" not in other and not _PLACEHOLDER_RE.match(other)
                 and _NUMBER_ONLY_RE.match(number)}
        texts = {text for _, text in found}
        if len(texts) != 1:
            return {}
        cell = max((cell for cell, _ in found), key=lambda c: -1 if c is None else c)
        return {name: (cell, texts.pop())}


__all__ = ["AnswerForm", "is_placeholder"]
