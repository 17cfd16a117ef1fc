"""The conversations of ``benchmarks/conversations.py``: questions a person asks one after
another about one real table, each with the answer established by hand and the pandas code
that computes it from the file.

Each conversation runs its ``load`` code and then every question's ``code`` in one namespace,
in order, as a careful analyst would in one kernel: a change the person asks for "from now
on" rebinds ``df`` and is kept; every other question works on new names, so the table stays
whole. Each question's code leaves its answer in ``result``. The expected answers below were
read off those results by hand; ``python benchmarks/conversations.py --check-cases`` (and
``tests/test_conversation_cases.py``) recompute them all from the files and fail on any
mismatch.

What a question probes (its ``probes``):

- ``change``: the person asks for a change "from now on" (it must be kept);
- ``subset``: answered on a subset (the table must stay whole for the next question);
- ``after-subset``: needs the whole table, less only the asked change, after a subset;
- ``percent``: a percent of a subset (a careless ``x / x * 100`` gives 100%);
- ``relation``: a relation between columns that the table's profile seems to answer
  (a column's min or max is not it);
- ``date-part``: the hour or month of a timestamp, not the timestamp;
- ``top-n``: the 2 or 3 top or worst, all of them;
- ``name`` / ``bool``: answered with a name, a category or yes/no, not a number;
- ``about-previous``: something new about the previous answer's subject.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "csv"
"""Where the conversations' files are (``seaborn/``, ``messy/``)."""

REL_TOLERANCE = 0.02
"""A number within the rounding of its written digits must also be within 2% of the answer
(``0`` for ``0.37`` is not right although it is ``0.37`` rounded)."""

# -- what an answer must state ------------------------------------------------------------------

# 6,389 and 6 389 (narrow or no-break space) are one number; a plain space is not a thousands
# separator ("18 417" is two numbers).
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:[,\u202f\u00a0]\d{3})+|\d+)(?:\.(\d+))?(?![\w])")
_CLOCK = re.compile(r"(?<![\w.])(\d{1,2})(?::\d{2})?\s*([ap])\.?\s?m\b\.?", re.IGNORECASE)
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{1,2}:\d{2}(?::\d{2})?")
_YES_NO = re.compile(r"(?<!\w)(yes|no|true|false)(?!\w)", re.IGNORECASE)


class Check(Protocol):
    """What an answer must state."""

    def find(self, answer: str) -> int | None:
        """Where ``answer`` states it (a character offset), or None."""

    def agrees(self, value: Any) -> bool:
        """True when the reference code's ``value`` is this answer."""


def numbers(text: str) -> list[tuple[int, float, int]]:
    """The numbers written in ``text``: offset, value and decimals written."""
    found = []
    for match in _NUMBER.finditer(text):
        raw = re.sub(r"[,\u202f\u00a0]", "", match.group())
        found.append((match.start(), float(raw), len(match.group(1) or "")))
    return found


@dataclass(frozen=True)
class Number:
    """A number, written here to the decimals it was read to (``"26.6807"``). An answer
    states it when one of its numbers is that value rounded to the digits the answer gives,
    with commas or a % sign as people write them."""

    text: str
    """The value as read off the reference code's result."""
    share: bool = False
    """The value is a share: a fraction (0.25) and a percent (25%) are both right."""

    @property
    def value(self) -> float:
        """The value as a float."""
        return float(self.text)

    @property
    def decimals(self) -> int:
        """The decimals it was read to."""
        return len(self.text.partition(".")[2])

    def find(self, answer: str) -> int | None:
        scales = (1.0, 100.0, 0.01) if self.share else (1.0,)
        for offset, written, decimals in numbers(answer):
            for scale in scales:
                if self._close(written, decimals, self.value * scale, scale):
                    return offset
        return None

    def _close(self, written: float, decimals: int, value: float, scale: float) -> bool:
        # The stored value is itself rounded: both roundings count.
        tolerance = 0.5 * 10**-decimals + 0.5 * 10**-self.decimals * scale + 1e-9
        near = abs(written - value) <= tolerance
        return near and (value == 0 or abs(written - value) <= REL_TOLERANCE * abs(value))

    def agrees(self, value: Any) -> bool:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return False
        return not math.isnan(number) and abs(number - self.value) <= 0.5 * 10**-self.decimals + 1e-9

    def __str__(self) -> str:
        return f"{self.text}{' (a share)' if self.share else ''}"


@dataclass(frozen=True)
class Name:
    """A name or a category, case-insensitive, as whole words (``80`` is not in ``33.80``);
    ``aliases`` are other ways to write it (``Sunday`` for ``Sun``)."""

    text: str
    """The value as the table writes it."""
    aliases: tuple[str, ...] = ()
    """Other right ways to write it."""

    def find(self, answer: str) -> int | None:
        found = []
        for name in (self.text, *self.aliases):
            words = r"\s+".join(re.escape(w) for w in name.split())
            match = re.search(rf"(?<!\w)(?<!\d\.){words}(?!\w)(?!\.\d)", answer, re.IGNORECASE)
            if match:
                found.append(match.start())
        return min(found, default=None)

    def agrees(self, value: Any) -> bool:
        return str(value).casefold() in {n.casefold() for n in (self.text, *self.aliases)}

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Hour:
    """An hour of the day, 0-23: ``18``, ``18:00``, ``6 pm`` and ``6 p.m.`` all state 18. A
    full timestamp is not an hour (its hour does not count)."""

    hour: int
    """The hour, 0-23."""

    def find(self, answer: str) -> int | None:
        text = _TIMESTAMP.sub(lambda m: " " * len(m.group()), answer)
        clocks = list(_CLOCK.finditer(text))
        for match in clocks:
            hour = int(match.group(1)) % 12 + (12 if match.group(2).lower() == "p" else 0)
            if hour == self.hour:
                return match.start()
        inside = [range(m.start(), m.end()) for m in clocks]
        for offset, written, decimals in numbers(text):
            if written == self.hour and decimals == 0 and not any(offset in r for r in inside):
                return offset
        return None

    def agrees(self, value: Any) -> bool:
        return int(value) == self.hour

    def __str__(self) -> str:
        return f"{self.hour}:00"


@dataclass(frozen=True)
class Bool:
    """Yes or no: the answer's first yes, no, true or false."""

    value: bool
    """The right answer."""

    def find(self, answer: str) -> int | None:
        match = _YES_NO.search(answer)
        if match is None or (match.group(1).lower() in ("yes", "true")) != self.value:
            return None
        return match.start()

    def agrees(self, value: Any) -> bool:
        return _is_bool(value) and bool(value) is self.value

    def __str__(self) -> str:
        return "yes" if self.value else "no"


def _is_bool(value: Any) -> bool:
    """Python's or numpy's bool (not 0 or 1)."""
    return isinstance(value, bool) or type(value).__name__ in ("bool_", "bool")


@dataclass(frozen=True)
class Items:
    """Several things, all stated: a list asked for (``ordered``: in this order, as "the 2
    oldest" asks) or the parts of one answer."""

    items: tuple[Check, ...]
    """What must be stated, each."""
    ordered: bool = False
    """They must appear in this order."""

    def find(self, answer: str) -> int | None:
        offsets = [item.find(answer) for item in self.items]
        if any(o is None for o in offsets):
            return None
        found = [o for o in offsets if o is not None]
        if self.ordered and found != sorted(found):
            return None
        return min(found)

    def agrees(self, value: Any) -> bool:
        values = list(value)
        if len(values) != len(self.items):
            return False
        if self.ordered:
            return all(i.agrees(v) for i, v in zip(self.items, values, strict=True))
        orders = itertools.permutations(values)
        return any(all(i.agrees(v) for i, v in zip(self.items, order, strict=True)) for order in orders)

    def __str__(self) -> str:
        return (" then " if self.ordered else " and ").join(str(i) for i in self.items)


def grade(answer: str, expected: Check) -> bool:
    """True when ``answer`` states ``expected``."""
    return expected.find(answer) is not None


# -- the conversations --------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """One question of a conversation."""

    text: str
    """What the person asks."""
    code: str
    """Pandas code that answers it after the earlier questions' code; leaves ``result``."""
    expected: Check
    """What the answer must state (read off ``result`` by hand)."""
    probes: tuple[str, ...] = ()
    """What the question probes (see the module's docstring)."""


@dataclass(frozen=True)
class Conversation:
    """One table and the questions asked about it, in order."""

    name: str
    """Short name (``--cases``) and the conversation's id."""
    file: str
    """The table, relative to the datasets' ``csv`` directory."""
    load: str
    """Code that reads the file (by its name, in its directory) into ``df``."""
    questions: tuple[Question, ...]
    """The questions, in the order they are asked."""

    def path(self, data: Path = DEFAULT_DATA) -> Path:
        """The table's file under ``data``."""
        return data / self.file


def _q(text: str, code: str, expected: Check, *probes: str) -> Question:
    return Question(text, code.strip(), expected, probes)

TAXIS = Conversation(
    "taxis",
    "seaborn/taxis.csv",
    "import pandas as pd\ndf = pd.read_csv('taxis.csv')",
    (
        _q("From now on, leave out the rides whose payment type is missing. How many rides are left?",
           """
df = df[df['payment'].notna()]
result = len(df)
""", Number("6389"), "change"),
        _q("Of the remaining rides picked up in Manhattan, what percent were paid in cash?",
           """
manhattan = df[df['pickup_borough'] == 'Manhattan']
result = (manhattan['payment'] == 'cash').mean() * 100
""", Number("26.6807", share=True), "subset", "percent"),
        _q("At which hour of the day do rides most often start?",
           """
result = pd.to_datetime(df['pickup']).dt.hour.value_counts().idxmax()
""", Hour(18), "date-part", "after-subset"),
        _q("Which pickup borough has the highest average tip?",
           """
borough = df.groupby('pickup_borough')['tip'].mean().idxmax()
result = borough
""", Name("Queens"), "name", "after-subset"),
        _q("Which 2 dropoff zones are reached most often from that borough?",
           """
from_borough = df[df['pickup_borough'] == borough]
result = from_borough['dropoff_zone'].value_counts().head(2).index.tolist()
""", Items((Name("Astoria"), Name("Jackson Heights")), ordered=True), "top-n", "name", "about-previous",
           "subset"),
        _q("What was the fare of the ride that took the longest from pickup to dropoff?",
           """
took = pd.to_datetime(df['dropoff']) - pd.to_datetime(df['pickup'])
result = df.loc[took.idxmax(), 'fare']
""", Number("81.86"), "relation", "after-subset"),
    ),
)

TITANIC = Conversation(
    "titanic",
    "seaborn/titanic.csv",
    "import pandas as pd\ndf = pd.read_csv('titanic.csv')",
    (
        _q("From now on, leave out the passengers whose age is unknown. How many passengers are left?",
           """
df = df[df['age'].notna()]
result = len(df)
""", Number("714"), "change"),
        _q("Of the remaining third-class passengers, what percent survived?",
           """
third = df[df['pclass'] == 3]
result = third['survived'].mean() * 100
""", Number("23.9437", share=True), "subset", "percent"),
        _q("What fare did the youngest passenger pay?",
           """
result = df.loc[df['age'].idxmin(), 'fare']
""", Number("8.5167"), "relation", "after-subset"),
        _q("Which embark town had the highest survival rate?",
           """
town = df.groupby('embark_town')['survived'].mean().idxmax()
result = town
""", Name("Cherbourg"), "name", "after-subset"),
        _q("Were most of the passengers who boarded there travelling in first class?",
           """
boarded = df[df['embark_town'] == town]
result = bool((boarded['class'] == 'First').mean() > 0.5)
""", Bool(True), "bool", "about-previous", "subset"),
        _q("How old were the 2 oldest passengers?",
           """
result = df['age'].nlargest(2).tolist()
""", Items((Number("80"), Number("74")), ordered=True), "top-n", "after-subset"),
    ),
)

TIPS = Conversation(
    "tips",
    "seaborn/tips.csv",
    "import pandas as pd\ndf = pd.read_csv('tips.csv')",
    (
        _q("From now on, look only at dinners. How many bills are left?",
           """
df = df[df['time'] == 'Dinner']
result = len(df)
""", Number("176"), "change"),
        _q("On which day is the average tip, as a percent of the bill, highest?",
           """
percent = df['tip'] / df['total_bill'] * 100
result = percent.groupby(df['day']).mean().idxmax()
""", Name("Sun", ("Sunday",)), "name"),
        _q("Of the Saturday dinners, what percent were at smokers' tables?",
           """
saturday = df[df['day'] == 'Sat']
result = (saturday['smoker'] == 'Yes').mean() * 100
""", Number("48.2759", share=True), "subset", "percent"),
        _q("What was the bill of the customer who tipped the highest percent of their bill?",
           """
best = percent.idxmax()
result = df.loc[best, 'total_bill']
""", Number("7.25"), "relation", "after-subset"),
        _q("On which day was that, and how many people were at the table?",
           """
result = (df.loc[best, 'day'], df.loc[best, 'size'])
""", Items((Name("Sun", ("Sunday",)), Number("2"))), "name", "about-previous"),
        _q("Did non-smokers tip a higher percent of the bill than smokers, on average?",
           """
by_smoker = percent.groupby(df['smoker']).mean()
result = bool(by_smoker['No'] > by_smoker['Yes'])
""", Bool(False), "bool"),
        _q("What were the 2 lowest tip percents? Round them to one decimal.",
           """
result = percent.nsmallest(2).round(1).tolist()
""", Items((Number("3.6"), Number("5.6")), ordered=True), "top-n"),
    ),
)

PENGUINS = Conversation(
    "penguins",
    "seaborn/penguins.csv",
    "import pandas as pd\ndf = pd.read_csv('penguins.csv')",
    (
        _q("From now on, leave out the penguins whose sex was not recorded. How many penguins are left?",
           """
df = df[df['sex'].notna()]
result = len(df)
""", Number("333"), "change"),
        _q("Of the remaining Adelie penguins, what percent live on Dream island?",
           """
adelie = df[df['species'] == 'Adelie']
result = (adelie['island'] == 'Dream').mean() * 100
""", Number("37.6712", share=True), "subset", "percent"),
        _q("What is the body mass of the penguin with the longest bill?",
           """
longest = df['bill_length_mm'].idxmax()
result = df.loc[longest, 'body_mass_g']
""", Number("6050"), "relation", "after-subset"),
        _q("Which species is that penguin, and on which island does it live?",
           """
result = (df.loc[longest, 'species'], df.loc[longest, 'island'])
""", Items((Name("Gentoo"), Name("Biscoe"))), "name", "about-previous"),
        _q("On which island are the penguins the lightest on average?",
           """
result = df.groupby('island')['body_mass_g'].mean().idxmin()
""", Name("Torgersen"), "name", "after-subset"),
        _q("Is the average body mass of the female Gentoo penguins above 5,000 g?",
           """
female_gentoo = df[(df['species'] == 'Gentoo') & (df['sex'] == 'FEMALE')]
result = bool(female_gentoo['body_mass_g'].mean() > 5000)
""", Bool(False), "bool", "subset"),
    ),
)

MPG = Conversation(
    "mpg",
    "seaborn/mpg.csv",
    "import pandas as pd\ndf = pd.read_csv('mpg.csv')",
    (
        _q("From now on, leave out the cars whose horsepower is unknown. How many cars are left?",
           """
df = df[df['horsepower'].notna()]
result = len(df)
""", Number("392"), "change"),
        _q("Of the remaining European cars, what percent get more than 30 mpg?",
           """
europe = df[df['origin'] == 'europe']
result = (europe['mpg'] > 30).mean() * 100
""", Number("25.0", share=True), "subset", "percent"),
        _q("Which 3 cars have the worst mpg? Give their names.",
           """
result = df.nsmallest(3, 'mpg')['name'].tolist()
""", Items((Name("hi 1200d"), Name("chevy c20"), Name("ford f250"))), "top-n", "name", "after-subset"),
        _q("In which model year was the average mpg highest?",
           """
result = df.groupby('model_year')['mpg'].mean().idxmax()
""", Name("80", ("1980",)), "name"),
        _q("How much does the car with the highest mpg weigh?",
           """
best = df['mpg'].idxmax()
result = df.loc[best, 'weight']
""", Number("2110"), "relation"),
        _q("Is that car from Japan?",
           """
result = bool(df.loc[best, 'origin'] == 'japan')
""", Bool(True), "bool", "about-previous"),
    ),
)

HOTELS = Conversation(
    "brussels-hotels",
    "messy/frictionless_table-with-accents_latin1_semicolon_decimalcomma.csv",
    "import pandas as pd\n"
    "df = pd.read_csv('frictionless_table-with-accents_latin1_semicolon_decimalcomma.csv', sep=';',\n"
    "                 encoding='latin-1', decimal=',')",
    (
        _q("From now on, use only the rows of single neighbourhoods: leave out the rows whose Quartier "
           "is 'All'. How many rows are left?",
           """
df = df[df['Quartier'] != 'All']
result = len(df)
""", Number("406"), "change"),
        _q("Which neighbourhood has the highest average occupancy rate?",
           """
result = df.groupby('Quartier')['Occupancy rate'].mean().idxmax()
""", Name("Grand Place & environs", ("Grand Place", "Grand-Place")), "name"),
        _q("In which month of the year is the occupancy rate highest on average?",
           """
month = pd.to_datetime(df['Date'], format='%d-%m-%y').dt.month_name()
result = df.groupby(month)['Occupancy rate'].mean().idxmax()
""", Name("October", ("Oct", "octobre")), "date-part", "name"),
        _q("Of the remaining rows from 2016, what percent have an average price above 100?",
           """
in_2016 = df[df['Année'] == 2016]
result = (in_2016['Average Price'] > 100).mean() * 100
""", Number("52.381", share=True), "subset", "percent"),
        _q("Was the average occupancy rate at Brussels Airport lower in 2016 than in 2015?",
           """
airport = df[df['Quartier'] == 'Brussels Airport']
by_year = airport.groupby('Année')['Occupancy rate'].mean()
result = bool(by_year[2016] < by_year[2015])
""", Bool(True), "bool", "subset", "after-subset"),
        _q("In which month of 2016 was its occupancy rate lowest, and what was the rate?",
           """
airport_2016 = airport[airport['Année'] == 2016]
lowest = airport_2016['Occupancy rate'].idxmin()
result = (month[lowest], airport_2016.loc[lowest, 'Occupancy rate'])
""", Items((Name("April", ("Apr", "avril", "2016-04", "04-2016", "01-04-16")), Number("0.528", share=True))),
           "date-part", "relation", "about-previous"),
    ),
)

CONVERSATIONS: tuple[Conversation, ...] = (TAXIS, TITANIC, TIPS, PENGUINS, MPG, HOTELS)
"""Every conversation, in the order the benchmark asks them."""


# -- the answers, recomputed ---------------------------------------------------------------------


def recompute(conversation: Conversation, data: Path = DEFAULT_DATA) -> list[Any]:
    """Each question's ``result``: the conversation's code run in one namespace, in the
    file's directory."""
    namespace: dict[str, Any] = {}
    results = []
    with contextlib.chdir(conversation.path(data).parent):
        exec(conversation.load, namespace)
        for question in conversation.questions:
            namespace.pop("result", None)
            exec(question.code, namespace)
            results.append(namespace["result"])
    return results


def plainly(value: Any) -> str:
    """A value as an answer would state it (lists and pairs joined, yes/no for a bool)."""
    if _is_bool(value):
        return "Yes" if value else "No"
    if isinstance(value, list | tuple):
        return ", ".join(plainly(v) for v in value)
    return str(value)


def check_cases(data: Path = DEFAULT_DATA, names: Sequence[str] = ()) -> list[str]:
    """Every expected answer recomputed from the files: one line per mismatch (none when all
    agree). The result stated plainly must also be graded right."""
    problems = []
    for conversation in CONVERSATIONS:
        if names and conversation.name not in names:
            continue
        for n, (question, value) in enumerate(zip(conversation.questions, recompute(conversation, data),
                                                  strict=True), 1):
            where = f"{conversation.name} {n}: {question.text!r}"
            if not question.expected.agrees(value):
                problems.append(f"{where}: the code gives {value!r}, the case expects {question.expected}")
            elif not grade(plainly(value), question.expected):
                problems.append(f"{where}: {plainly(value)!r} is not graded right")
    return problems
