"""Answers that are grounded but doubtful: results that cannot be what the question asked.

A small model that filters the wrong way still prints a number, and the number is in a
cell: grounding cannot see the slip. Shapes of result give it away often enough to
check each answer for them (reasons with the key ``doubtful`` and the doubt's name as kind,
naming what was seen):

- **the whole or nothing of a subset**: a question asks for a share (percent, proportion,
  rate) and the answer is 0% or 100% (``len(late) / len(late) * 100``);
- **a share among a subset over the whole table**: "Of the remaining European cars, what
  percent ...?" computed as ``len(fast_european) / len(df)``;
- **the table's own row count** given as the count of some of its rows (the filter never
  applied; DABench hard 275: every row counted as a duplicate);
- **a list shorter than asked**: "the 2 worst scores" answered with one value;
- **one value for every group**: three or more ``@name[value]`` items with the same
  non-zero number (``@class1_outliers[20], @class2_outliers[20], @class3_outliers[20]``:
  DABench medium 180, where the 1.5B model ran the same selection of the whole table for
  each class);
- **an average nobody took**: the question asks for an average (a mean) and none of its
  own cells computes one, nor anything built on one (a test of means, a z-score, a sum
  over a count): a minimum or one row's value given instead;
- **a yes/no question left open**: "Were most of them in first class?" answered with a
  number alone;
- **rows an earlier question asked about**: the question's last cell keeps only the rows of
  a value an earlier question named and this one does not (``df[df.day == 'Sat']`` after
  "Of the Saturday dinners ...", for a question about every bill);
- **a verdict written, not computed**: a form's verdict item the question's last cell wrote
  into its print as it stands, comparing nothing (``@relationship_type[none]``); a yes/no
  question answered from a sentence the code
  printed as written (``print(f"Non-smokers tipped a higher percent ... {a:.2f}% ... {b:.2f}%")``
  with 99.08 and 101.49), none of the question's cells comparing anything (a filter's
  comparison selects rows and decides nothing);
- **a verdict the question's own rule contradicts**: "Consider the relationship to be
  nonlinear if the p-value is less than 0.05 and ..." and the answer's own
  ``@p_value[0.4058]`` beside ``@relationship_type[nonlinear]`` (DABench medium 34; the
  rules are read by :mod:`.rules`);
- **a slip kept**: the question's last cell has a slip the line after its output named
  (:mod:`.slips`: pandas' ``.std()`` for the population standard deviation, DABench easy
  129), and the model answered from it all the same;
- **a p-value that cannot go with its correlation**: a correlation's two-sided p-value is
  a function of the coefficient and the rows it was computed on (Pearson's and Spearman's
  through Student's t with n - 2 degrees of freedom), so ``@correlation_coefficient[0.99]
  @p_value[0.9896]`` (DABench medium 11, the 1.5B model's own p-value formula) is wrong
  whatever the rows: even on 3 rows a coefficient of 0.985 has p < 0.12. Checked with
  bounds that need no table of the t distribution: the largest p a coefficient can have is
  its p on 3 rows (Student's t with one degree of freedom, closed form), the smallest no
  less than the normal distribution's on all the table's rows (the t distribution's tails
  are heavier); the coefficient and the p-value are taken at either end of their rounding;
- **most of the table counted as outliers**: outlier counts adding up to more than half the
  table's rows, which neither the quartiles' bounds nor a z-score can give (DABench medium
  180: 211 + 178 + 487 of 891 passengers);
- **a p-value outside 0 to 1, or a correlation outside -1 to 1**: another number of the
  computation taken for it (a test's statistic, DABench hard 177: ``@p_value[49572.0000]``);
- **the row labels of a printed Series** given as its values (``803`` for ``803    8.5167``);
- **one row of a column given for one value**: the cells printed a whole Series inside a
  form's item (``@mean[0   -0.05 ... Length: 337]``, from ``a - b.mean()``), and the answer
  gives one of its rows (DABench medium 250).

Each is a pure function of the answer, the question and the uploaded tables' row counts;
a doubtful answer that is right says so and is accepted (each doubt goes back once, and a
second doubt found after the first went back goes back too), and one still doubtful at the
end is what the analyst's extra attempts are for.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable

from ...claims import ClaimStatus, parse_mantissa
from ..prompting import message
from .answers import AnswerCase, AnswerCheck, code_since, printed_since
from .checks import carried_filters, syntax_nodes
from .decisions import Reason
from .form import AnswerForm
from .rules import stated_rules
from .slips import recomputed_columns, slips_in

_SHARE_RE = re.compile(r"\b(?:percent(?:age)?s?|proportions?|shares?|fractions?|rates?|ratios?)\b|%", re.I)
_FILTER_RE = re.compile(r"\b(?:more|less|fewer|greater|higher|lower|at least|at most|above|below|over|"
                        r"under|without|with|where|whose|only|remaining|late|missing|between|except|"
                        r"excluding|duplicated?|duplicates|outliers?)\b", re.I)
_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                 "ten": 10}
_RANKED = (r"(?:worst|best|largest|smallest|highest|lowest|biggest|most|least|top|bottom|first|last|"
           r"cheapest|longest|shortest|oldest|youngest)")
_COUNT = r"(\d{1,2}|two|three|four|five|six|seven|eight|nine|ten)"
_LIST_RES = (re.compile(rf"(?<!\bat\s)\b{_RANKED}\s+{_COUNT}\b", re.I),  # not "at least 5 observations"
             re.compile(rf"\b{_COUNT}\s+{_RANKED}\b", re.I),
             # "Which 3 cars have the worst mpg?", "the 5 countries with the highest GDP"
             re.compile(rf"(?<!\bat least\s)(?<!\bat most\s)\b{_COUNT}\s+[a-z]+(?:\s+[a-z]+)?\s+"
                        rf"(?:with|that|which|who|whose|having|have|has|had|get|gets)\s+(?:the\s+)?{_RANKED}\b",
                        re.I))
_ITEM_SPLIT = re.compile(r",|;|\n|\band\b|\s[-*]\s")
_NUMBER_RE = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
_SAME_FOR_EACH = 3
"""Items with one non-zero value that make an answer doubtful (two are often equal by right:
a mean with and without outliers when there were none)."""


_PERCENT_ASKED = re.compile(r"\bpercent(?:age)?\b|%", re.I)


def whole_or_nothing(case: AnswerCase) -> str | None:
    """A share asked, and 0% or 100% answered (or, to a question asking for a percent, a
    lone 0 or 100: the conversation benchmark's mpg, "100.0" from a subset filtered on the
    test it then took the mean of)."""
    if not _SHARE_RE.search(case.question.question):
        return None
    claims = case.grounding.claims
    lone = len(claims) == 1 and bool(_PERCENT_ASKED.search(case.question.question))
    for claim in claims:
        if claim.value in (0.0, 100.0) and (claim.kind == "percent" or (lone and claim.kind == "number")):
            return message("doubt_whole_share", value=claim.text)
    return None


_AMONG_RE = re.compile(r"^\W*(?:of|among|for)\s+(?:the|all|these|those)\b", re.I)
"""A question that names its subset first ("Of the remaining European cars, what percent
...?"): the share's denominator is that subset."""
_WHOLE_DENOMINATOR = re.compile(r"/\s*(?:len\(\s*(\w+)\s*(?:\.index)?\s*\)|(\w+)\.shape\[0\])")


def whole_denominator(case: AnswerCase) -> str | None:
    """A share among a subset ("Of the remaining European cars, what percent get more than
    30 mpg?") divided by the rows of the whole table: ``len(europe_fast) / len(df)`` (the
    conversation benchmark's mpg, the after tree: 4.34% for 25%)."""
    q = case.question
    if not q.frames or not _SHARE_RE.search(q.question) or not _AMONG_RE.search(q.question):
        return None
    dividing = [code for code in _answer_code(case) if "/" in code]
    if not dividing:
        return None
    latest = dividing[-1]  # the cell that computed the share given, most likely
    rebound = _assigned(latest)
    whole = [name for found in _WHOLE_DENOMINATOR.finditer(latest) for name in found.groups()
             if name and name in q.frames and name not in rebound]
    if not whole:
        return None
    among = _share_among(latest)
    example = message("share_among_code", subset=among[0], share=among[1]) if among \
        else message("share_among")
    return message("doubt_whole_denominator", table=whole[0], example=" " + example)


def _share_among(code: str) -> tuple[str, str] | None:
    """The share the question asks for, written from the cell's own filters: the first keeps
    the rows it is among, the last the ones it counts (``euro_df = df[df.origin ==
    'europe']`` then ``euro_df = euro_df[euro_df.mpg > 30]``: ``subset = df[df.origin ==
    'europe']`` and ``(subset.mpg > 30).mean() * 100``); None when the cell does not filter
    twice in a chain."""
    filters = [(node.targets[0].id, node.value.value.id, node.value.slice)
               for node in syntax_nodes(code) or []
               if isinstance(node, ast.Assign) and len(node.targets) == 1
               and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Subscript)
               and isinstance(node.value.value, ast.Name)
               and isinstance(node.value.slice, (ast.Compare, ast.BoolOp, ast.Call, ast.UnaryOp))]
    if len(filters) < 2 or filters[-1][1] != filters[0][0]:
        return None
    (_, base, among), (last_target, last_base, counted) = filters[0], filters[-1]

    class _Subset(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.Name("subset", node.ctx) if node.id in (last_base, last_target) else node

    counted = _Subset().visit(ast.parse(ast.unparse(counted), mode="eval")).body
    return f"subset = {base}[{ast.unparse(among)}]", f"print(({ast.unparse(counted)}).mean() * 100)"


def _answer_code(case: AnswerCase) -> list[str]:
    """The code of the question's own cells that printed the answer's numbers, oldest first;
    all its own cells when no number of the answer was printed by one."""
    first = case.question.first_cell
    sources = {claim.source.cell_index for claim in case.grounding.claims
               if claim.source is not None and claim.source.cell_index is not None
               and claim.source.cell_index >= first}
    if not sources:
        return _own_code(case)
    return [code for index in sorted(sources) for code in code_since(case.cells[index:index + 1], 0)]


def _assigned(code: str) -> set[str]:
    """The names ``code`` binds (``df = df[df.origin == 'europe']``): a name bound in the
    cell that divides is no longer the whole table there."""
    return {target.id for node in syntax_nodes(code) or [] if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name)}


def whole_table(case: AnswerCase) -> str | None:
    """The table's own row count, for a question that counts some of its rows."""
    rows = set(case.question.table_rows)
    if not rows or not _FILTER_RE.search(case.question.question):
        return None
    for claim in case.grounding.claims:
        if claim.status is not ClaimStatus.UNSUPPORTED and claim.value in rows:
            return message("doubt_whole_table", value=claim.text)
    return None


def short_list(case: AnswerCase) -> str | None:
    """Fewer items than the question asks for ("the 3 largest")."""
    wanted = _items_asked(case.question.question)
    if wanted is None:
        return None
    given = _items_given(case.answer)
    return message("doubt_short_list", wanted=wanted, given=given) if given < wanted else None


def same_for_each(case: AnswerCase) -> str | None:
    """Three or more ``@name[value]`` items with one non-zero number: each group computed
    on the whole table, not on its own."""
    names: dict[float, list[str]] = {}
    shown: dict[float, str] = {}
    for name, given in AnswerForm.given(case.answer).items():
        value = given.strip()
        if not _NUMBER_RE.fullmatch(value):
            continue
        number = float(value.replace(",", ""))
        if number != 0 and name not in names.setdefault(number, []):
            names[number].append(name)
            shown.setdefault(number, value)
    for number, same in names.items():
        if len(same) >= _SAME_FOR_EACH:
            return message("doubt_same_value", value=shown[number], names=", ".join(f"@{n}" for n in same))
    return None


_OUTLIER_COUNT_RE = re.compile(r"outlier", re.I)
_NOT_A_COUNT_RE = re.compile(r"without|non_?outlier|inlier|remain|clean|kept|mean|median|std|avg|average|"
                             r"percent|pct|ratio|share|proportion|rate|value|index|threshold|bound", re.I)
"""Items named for outliers that are not their count (``mean_without_outliers``,
``outlier_percentage``)."""


def outliers_most(case: AnswerCase) -> str | None:
    """Counts of outliers that add up to more than half the table's rows. Outliers are the few
    rows far from the rest, by any method the questions name: at most half lie outside the
    quartiles (the IQR's bounds are wider still), and at most one in k² has a z-score past k
    (Chebyshev's inequality), in the whole table or in each group. DABench medium 180 with the
    1.5B model: ``class1[(class1['Fare'] - stats.zscore(class1['Fare'])) > 3]``, and
    211 + 178 + 487 of the 891 passengers given as the three classes' outliers (3, 7, 14)."""
    rows = max(case.question.table_rows, default=0)
    if rows <= 0 or not _OUTLIER_COUNT_RE.search(case.question.question):
        return None
    counts = {name: int(value.strip()) for name, value in AnswerForm.given(case.answer).items()
              if _OUTLIER_COUNT_RE.search(name) and not _NOT_A_COUNT_RE.search(name)
              and re.fullmatch(r"\d+", value.strip())}
    total = sum(counts.values())
    if not counts or 2 * total <= rows:
        return None
    named = ", ".join(f"@{name}[{count}]" for name, count in counts.items())
    return message("doubt_outliers_most", items=named, total=f"{total:,}", table_rows=f"{rows:,}")


_CORRELATION_RE = re.compile(r"\bcorrelat", re.I)
_KENDALL_RE = re.compile(r"\bkendall", re.I)
_P_NAME_RE = re.compile(r"(?:^|_)p(?:_?val(?:ue)?s?)?(?:_|$)|pvalue", re.I)
_R_NAME_RE = re.compile(r"corr|pearson|spearman|rho|(?:^|_)r(?:_?value)?(?:_|$)|coef", re.I)
_DECIMAL_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def p_value_disagrees(case: AnswerCase) -> str | None:
    """A correlation's p-value that no number of rows could give with its coefficient."""
    question = case.question.question
    if not _CORRELATION_RE.search(question) or _KENDALL_RE.search(question):
        return None
    written = _p_and_r(AnswerForm.given(case.answer))
    if len(written) != 2:
        return None
    p_text, r_text = written["p"], written["r"]
    p, r = float(p_text), abs(float(r_text))
    if not (0.0 <= p <= 1.0 and r <= 1.0):
        return None
    p_half, r_half = _half_unit(p_text), _half_unit(r_text)
    largest = _p_student_1(_t(max(r - r_half, 0.0), 3))
    if p - p_half > largest:
        return message("doubt_p_value", p=p_text, r=r_text, bound=f"below {largest:.2g} even on 3 rows")
    rows = max(case.question.table_rows, default=0)
    if rows > 3:
        smallest = math.erfc(_t(min(r + r_half, 1.0), rows) / math.sqrt(2))
        if p + p_half < smallest:
            return message("doubt_p_value", p=p_text, r=r_text,
                           bound=f"above {smallest:.2g} even on all {rows:,} rows")
    return None


_CORR_NAME_RE = re.compile(r"corr|pearson|spearman|kendall|rho|(?:^|_)r(?:_?value)?$", re.I)
"""An item named for a correlation coefficient (not ``coef``: a regression's is unbounded)."""


def out_of_range(case: AnswerCase) -> str | None:
    """A p-value outside 0 to 1, or a correlation coefficient outside -1 to 1: some other
    number of the computation taken for it (DABench hard 177 with the 1.5B model:
    ``p_value, _ = mannwhitneyu(...)`` and ``@p_value[49572.0000]``, the U statistic)."""
    for name, value in AnswerForm.given(case.answer).items():
        number = _number(value.strip())
        if number is None or math.isnan(number):
            continue
        if _P_NAME_RE.search(name) and not 0.0 <= number <= 1.0:
            return message("doubt_out_of_range", name=name, value=value.strip(), what="a p-value",
                           bounds="0 and 1")
        if _CORR_NAME_RE.search(name) and not _P_NAME_RE.search(name) and abs(number) > 1.0:
            return message("doubt_out_of_range", name=name, value=value.strip(),
                           what="a correlation coefficient", bounds="-1 and 1")
    return None


def rule_broken(case: AnswerCase) -> str | None:
    """A verdict item the question's own rule on the answer's p-value and coefficient
    contradicts (:mod:`.rules`; DABench medium 34: ``@p_value[0.4058]
    @relationship_type[nonlinear]`` where nonlinear needs p < 0.05). Each number is taken at
    either end of its rounding: a verdict the rounding leaves open is not doubted."""
    rules = stated_rules(case.question.question)
    if not rules:
        return None
    given = AnswerForm.given(case.answer)
    written = _p_and_r(given)
    if len(written) < 2 and case.steps:
        shown = " ".join(text for _, text in printed_since(case.cells, case.question.first_cell,
                                                          skip_roles=("profile",)))
        written = _printed_p_and_r(shown) | written
    values = {q: (float(text), _half_unit(text)) for q, text in written.items()}
    if "r" in values:
        values["|r|"] = (abs(values["r"][0]), values["r"][1])
    for name, value in given.items():
        verdict = value.strip().strip("'\"`*").strip()
        if any(ch.isdigit() for ch in verdict):
            continue
        named = [rule for rule in rules if rule.names(verdict)]
        if not named or any(rule.holds(values) is not False for rule in named):
            continue
        said = ", ".join(f"{q} = {text}" for q, text in written.items())
        conditions = " and ".join(str(c) for c in named[0].conditions)
        follows = {rule.outcome for rule in rules if rule.holds(values) is True}
        told = {"item": f"@{name}[{value.strip()}]", "outcome": named[0].outcome, "conditions": conditions,
                "stated": said}
        if len(follows) == 1:
            return message("doubt_rule", expected=follows.pop(), **told)
        return message("doubt_rule_open", **told)
    return None


_PRINTED_RES = {
    "p": re.compile(r"\bp[\s_-]?(?:val(?:ue)?)?\s*[:=]\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", re.I),
    "r": re.compile(r"\b(?:r|correlation(?: coefficient)?|pearson(?:'s)?(?: r)?)\s*[:=]\s*"
                    r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", re.I),
}


def _printed_p_and_r(shown: str) -> dict[str, str]:
    """The p-value and the coefficient the question's cells printed with a label (``p-value:
    1.4e-10``, ``r = 0.99``), where each was printed as one value: a verdict item given
    without them is held against the rule with what the code printed (DABench easy 72:
    ``'Normal' if p < 0.05`` printed 'Normal' beside p = 1.4e-10)."""
    found = {}
    for quantity, pattern in _PRINTED_RES.items():
        values = {m.group(1) for m in pattern.finditer(shown)}
        if len(values) == 1 and (quantity != "p" or 0.0 <= float(next(iter(values))) <= 1.0):
            found[quantity] = values.pop()
    return found


def _p_and_r(given: dict[str, str]) -> dict[str, str]:
    """The answer's p-value and coefficient as it wrote them (``p``, ``r``), where one item
    is named for each."""
    numbers = {n: v.strip() for n, v in given.items() if _DECIMAL_RE.fullmatch(v.strip())}
    ps = [v for n, v in numbers.items() if _P_NAME_RE.search(n)]
    rs = [v for n, v in numbers.items() if not _P_NAME_RE.search(n) and _R_NAME_RE.search(n)]
    return ({"p": ps[0]} if len(ps) == 1 else {}) | ({"r": rs[0]} if len(rs) == 1 else {})


def _t(r: float, n: int) -> float:
    """Student's t of a correlation ``r`` over ``n`` rows (infinite for a perfect one)."""
    return math.inf if r >= 1.0 else r * math.sqrt((n - 2) / (1.0 - r * r))


def _p_student_1(t: float) -> float:
    """The two-sided p-value of ``t`` with one degree of freedom (the Cauchy distribution)."""
    return 0.0 if math.isinf(t) else 1.0 - 2.0 / math.pi * math.atan(abs(t))


def _half_unit(text: str) -> float:
    """Half the place of the last digit written (the claims' reading of a number): how far
    the rounded value may be off."""
    mantissa, _, exponent = text.lower().lstrip("+-").partition("e")
    return 0.5 * parse_mantissa(mantissa, exponent or None)[1]


_AVERAGE_ASKED = re.compile(r"\b(?:average|mean)\b(?![\s_-]*(?:squared|absolute))", re.I)
_AVERAGING = re.compile(
    r"\b(?:mean|nanmean|average|describe|pivot_table|zscore|ttest_\w*|f_oneway|anova\w*|mannwhitneyu|kruskal|"
    r"std|nanstd|var|StandardScaler|scale|normalize|rolling|expanding|ewm|mean_\w+)\s*\("
    r"|\bsum\((?:[^()]|\([^()]*\))*\)\s*/|\.sum\(\)\s*/|/\s*\d+(?:\.0*)?(?![\d.eE])(?!\s*\*)", re.I)
"""What code that takes an average calls: a mean, or a statistic or test built on one; or a
sum over a count, or a division by a whole number (``(low + high) / 2``)."""
_AVERAGE_NAME = re.compile(r"mean|average|avg", re.I)


def _takes_average(code: str) -> bool:
    """Whether ``code`` takes an average or reads one taken before: :data:`_AVERAGING`; a
    string or a keyword that names one (an aggregation ``'mean'``, a column ``['Mean GDP']``,
    ``average='weighted'``); or a
    variable named for one that this code reads and does not assign. Comments, the text it
    prints (:func:`_prose`), the form's item names (``@mean_fare[...]``) and the names the
    code assigns are no average: the 1.5B
    model named its variable for the form's ``country_with_highest_average_...`` and took the
    single highest day's country (DABench easy 123), dividing by a column for "per million"."""
    if _AVERAGING.search(re.sub(r"#[^\n]*", "", code)):
        return True
    nodes = syntax_nodes(code)
    if nodes is None:
        return bool(_AVERAGE_NAME.search(re.sub(r"@\w+\[", "[", code)))
    written = {id(part) for n in nodes for part in _prose(n)}
    strings = [re.sub(r"@\w+\[", "[", n.value) for n in nodes
               if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in written]
    keywords = [n.arg for n in nodes if isinstance(n, ast.keyword) and n.arg]  # average='weighted'
    if any(_AVERAGE_NAME.search(text) for text in [*strings, *keywords]):
        return True
    names = [n for n in nodes if isinstance(n, ast.Name) and _AVERAGE_NAME.search(n.id)]
    assigned = {n.id for n in names if isinstance(n.ctx, ast.Store)}
    return any(isinstance(n.ctx, ast.Load) and n.id not in assigned for n in names)


def _prose(node: ast.AST) -> list[ast.AST]:
    """The text ``node`` writes for a reader: an f-string's literal parts, a printed string
    ("The neighbourhood with the highest average occupancy rate is ..." over a ``.max()``:
    the conversation benchmark's brussels-hotels), which name an average without taking one."""
    if isinstance(node, ast.JoinedStr):
        return list(node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
        return list(node.args)
    return []


def no_average(case: AnswerCase) -> str | None:
    """The question asks for an average and none of its own cells takes one: the lightest
    single penguin's island given for the island "the penguins are the lightest on average"
    (the conversation benchmark's penguins, where the 1.5B model took ``.min()``)."""
    q = case.question
    if not q.has_files or not case.steps or not _AVERAGE_ASKED.search(q.question):
        return None
    own = _own_code(case)
    if not own or any(_takes_average(code) for code in own):
        return None
    return message("doubt_no_average")


_YES_NO_ASKED = re.compile(r"^\W*(?:is|are|was|were|does|do|did|has|have|had|can|could|will|would|should)\b"
                           r"(?!\s+you\b)", re.I)
"""A yes/no question by its first word; "Could you list ...?" is a request, not one."""
_VERDICT = re.compile(r"\b(?:yes|no|true|false|not|none|neither|nor)\b|n't\b", re.I)


def no_verdict(case: AnswerCase) -> str | None:
    """A yes/no question ("Were most of the passengers who boarded there travelling in
    first class?") answered with a number alone (56.92%), which leaves the question open
    (the conversation benchmark's titanic). A question that gives its answer's form is the
    form's to judge."""
    q = case.question.question
    if not _YES_NO_ASKED.search(q) or AnswerForm.of(q).names or _VERDICT.search(case.answer):
        return None
    return message("doubt_no_verdict")


_WORD_VALUE = re.compile(r"^[a-z][a-z _-]*$")
"""An item's value that is a word (a verdict), not a number."""
_WRITTEN_VERDICT = re.compile(r"\b(?:yes|no|not|true|false|higher|lower|more|less|greater|larger|smaller|"
                              r"bigger|significant(?:ly)?|normal(?:ly)?|correlated)\b", re.I)


def written_verdict(case: AnswerCase) -> str | None:
    """A verdict that was only text the code printed as written: a yes/no question (or one
    whose form offers verdict words) answered while no cell of the question compares
    anything, from a sentence printed as it stands (the conversation benchmark's tips: "Yes,
    non-smokers tipped a higher percent" from a print of that sentence beside 99.08% and
    101.49%); or a form's verdict item printed as written (``@relationship_type[none]`` in an
    f-string) by the question's last cell, which compares nothing (DABench medium 11, after
    its p-value was sent back)."""
    q = case.question.question
    own = _own_code(case) if case.steps else []
    if not own:
        return None
    form = AnswerForm.of(q)
    given = {name: value.strip().lower() for name, value in form.given(case.answer).items()
             if name in form.names}
    items = [f"@{name}[{value}]" for name, value in given.items() if _WORD_VALUE.match(value)]
    yes_no = bool(_YES_NO_ASKED.search(q) or form.words) and bool(
        _VERDICT.search(case.answer) or _WRITTEN_VERDICT.search(case.answer))
    if not yes_no and not items:
        return None
    last, written = _written(own[-1])
    if last is None or (yes_no and not items and any(_written(code)[0] is None for code in own)):
        return None  # compared in code, or a cell that cannot be read
    for text in written:
        if any(item in text.lower() for item in items) or (yes_no and _WRITTEN_VERDICT.search(text)):
            return message("doubt_written_verdict", text=" ".join(text.split())[:120])
    return None


def _written(code: str) -> tuple[bool | None, list[str]]:
    """(True, the text its prints write as it stands) for a cell that compares nothing;
    (None, []) for one that compares (or cannot be read). A filter's comparison selects rows
    and decides nothing."""
    nodes = syntax_nodes(code)
    if nodes is None:
        return None, []
    filters = {id(inner) for node in nodes if isinstance(node, ast.Subscript)
               for inner in ast.walk(node.slice)}
    if any(isinstance(node, (ast.If, ast.IfExp))
           or (isinstance(node, ast.Compare) and id(node) not in filters) for node in nodes):
        return None, []
    prints = [node for node in nodes
              if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "print"]
    return True, [text for node in prints for text in _literal_text(node)]


_REMOVAL_ASKED = re.compile(
    r"(?s)(?=.*(?:\bIQR\b|\binter-?quartile|\bquartile range|\bz[- ]?scores?\b))"
    r"(?=.*\boutliers?\b)(?=.*\b(?:prune|pruned|pruning|remove|removed|removing|exclude|excluded|excluding|"
    r"drop|dropped|dropping|discard|discarded|filter(?:ed)? out|without)\b)", re.I)
"""A question that leaves the outliers out (by the interquartile range or z-scores) before it
computes."""
_SUMMARY_CALL = re.compile(r"\.(?:mean|std|var|median|describe|corr)\(")
_BOUNDED = re.compile(r"\b(?:quantile|percentile|nanpercentile|iqr|zscore|between|clip)\b|\b[qQ][13]\b|"
                      r"\b(?:lower|upper|low|high)(?:_\w+)?\b|\bbounds?\b|\boutlier|\bfilter", re.I)
_APPLIED = re.compile(r"[<>]|\b(?:between|clip|query|zscore|isin)\b|\boutlier|\bfilter|\bclean|\bkept\b",
                      re.I)
"""The bounds used, not only computed: a comparison, a call that keeps rows, a subset's name
(easy 18 on 7ddff9d: ``q = df['Mar.2019'].quantile([0.25, 0.75])`` and the mean of every row
beside it)."""


def outliers_kept(case: AnswerCase) -> str | None:
    """The question leaves the outliers out before it computes, and the last cell computes
    its summary over a table with no bound in sight (DABench easy 18 with the 1.5B model:
    the pruning step was undone for replacing ``df``, and the next cell took
    ``df['Mar.2019'].mean()`` over every row: 364.78, for 171.44)."""
    q = case.question
    if not q.has_files or not case.steps or not _REMOVAL_ASKED.search(q.question):
        return None
    own = _own_code(case)
    last = own[-1] if own else ""
    if not _SUMMARY_CALL.search(last) or (_BOUNDED.search(last) and _APPLIED.search(last)):
        return None
    return message("doubt_outliers_kept")


def slip_kept(case: AnswerCase) -> str | None:
    """The question's last cell has a slip the line after its output named
    (:mod:`.slips`), and the answer came from it: the line was read and not acted on
    (DABench easy 129: ``df['Fare'].std()`` for "the population standard deviation",
    named, and ``@std_dev_fare[49.69]`` answered at once, for 49.67). The same for a line
    that said the step's result is wrong (:attr:`.AnswerCase.told`: easy 55, a conversion that
    made NaN of 544 of 856 values named, and the mean of the rest answered at once)."""
    own = _own_code(case) if case.steps else []
    q = case.question
    found = slips_in(q.question, own[-1]) + recomputed_columns(q.question, own[-1], q.columns) if own else []
    said = [reason.text for reason in found] + list(case.told)
    if not said:
        return None
    return message("doubt_slip", slip=said[0].removeprefix("- "))


def carried_filter(case: AnswerCase) -> str | None:
    """The question's last cell keeps only rows an earlier question asked about, and this
    question does not ask for them (the conversation benchmark's tips: the line after the
    step said so, and the model answered from ``df[df.day == 'Sat']`` anyway)."""
    q = case.question
    own = _own_code(case) if q.earlier and case.steps else []
    found = carried_filters(own[-1], q.frames, q.question, q.earlier) if own else []
    if not found:
        return None
    return message("doubt_carried", comparison=found[0].text, frame=found[0].frame)


_SERIES_END = re.compile(r"^(?:Name: .*, )?(?:dtype|Length): ")
"""The last line of a printed pandas Series (``Name: fare, dtype: float64``)."""
_SERIES_ROW = re.compile(r"^(-?\d+)\s{2,}(\S.*?)\s*$")
"""A row of a printed Series whose labels are integers: ``803    8.5167``."""
_ASKS_FOR_LABELS = re.compile(r"\bindex|\brow\b|\brows\b|\bids?\b|\blabels?\b|\bposition|\bline\b|"
                              r"\bwhich\b|\bwho\b", re.I)
"""A question that asks for rows' labels or positions, or which one (the index may then be
the answer)."""
_INDEX_NAME = re.compile(r"^\s*\w[\w .-]*$")
"""The line above a Series' rows that names its index (``pclass`` above a ``value_counts()``,
a year above a ``groupby``): its labels are values of the data, not row labels."""


def row_labels(case: AnswerCase) -> str | None:
    """The answer's numbers are the row labels (the index, left column) of a Series the
    question's cells printed, not its values: ``print(df[df.age == df.age.min()].fare)``
    writes ``803    8.5167``, and the 1.5B model answered 803 (the conversation benchmark's
    titanic: the fare of the youngest passenger, and "630 and 851" for the ages of the 2
    oldest, 80.0 and 74.0). A number the cells also printed elsewhere, as a value, is left alone."""
    if not case.steps or _ASKS_FOR_LABELS.search(case.question.question):
        return None
    labels: dict[float, str] = {}
    values: set[float] = set()
    for _, text in printed_since(case.cells, case.question.first_cell, skip_roles=("profile",)):
        block: list[tuple[str, str]] = []
        above = ""
        for line in text.splitlines():
            row = _SERIES_ROW.match(line)
            if row:
                block.append((row.group(1), row.group(2)))
                continue
            if _SERIES_END.match(line) and block and not _INDEX_NAME.match(above):
                for label, value in block:
                    labels.setdefault(float(label), value)
                    number = _number(value)
                    if number is not None:
                        values.add(number)
            values.update(float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", line))  # a number printed as such
            above, block = line, []
    claims = [c for c in case.grounding.claims if c.kind == "number"]
    read = [c for c in claims if c.value in labels and c.value not in values]
    if not read or len(read) < len(claims):
        return None
    return message("doubt_row_labels", labels=", ".join(c.text for c in read),
                   values=", ".join(labels[c.value] for c in read))


_ITEM_BLOCK = re.compile(r"@(\w+)\[([^\[\]]*\n[^\[\]]*)\]")
"""A form item printed over several lines: ``@mean[0   -0.05\n1   -0.05\n...]``."""
_SERIES_LENGTH = re.compile(r"Length: ([\d,]*\d)")


def many_values(case: AnswerCase) -> str | None:
    """The question's cells printed a whole Series or array where the form asks for one
    value, and the answer gives one of its rows: DABench medium 250 with the 1.5B model,
    ``df['batting_average'] - df['on_base_percentage'].mean()`` (the mean of one column taken
    from each row of the other) printed in ``@mean[...]`` as 337 rows, answered with the first."""
    if not case.steps:
        return None
    given = AnswerForm.given(case.answer)
    for _, text in printed_since(case.cells, case.question.first_cell, skip_roles=("profile",)):
        for found in _ITEM_BLOCK.finditer(text):
            name, block = found.group(1), found.group(2)
            lines = [line for line in block.strip().splitlines() if line.strip()]
            if name not in given or len(lines) < 3 or "\n" in given[name].strip():
                continue
            length = _SERIES_LENGTH.search(block)
            count = length.group(1) if length else str(len([ln for ln in lines if not _SERIES_END.match(ln)]))
            return message("doubt_many_values", name=name, count=count, value=given[name].strip())
    return None


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _literal_text(call: ast.Call) -> list[str]:
    """The text a ``print`` call writes as it is in the code (its string parts, f-strings'
    too), one piece per argument."""
    pieces = []
    for arg in call.args:
        parts = arg.values if isinstance(arg, ast.JoinedStr) else [arg]
        text = "".join(p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str))
        if text.strip():
            pieces.append(text)
    return pieces


def _own_code(case: AnswerCase) -> list[str]:
    """The code of the question's own cells (not the loading of files)."""
    return code_since(case.cells, case.question.first_cell, skip_roles=("profile",))


DOUBTS: tuple[Callable[[AnswerCase], str | None], ...] = (
    whole_or_nothing, whole_denominator, whole_table, short_list, same_for_each, outliers_most, out_of_range,
    p_value_disagrees, rule_broken, no_average, no_verdict, written_verdict, carried_filter, slip_kept,
    outliers_kept,
    row_labels, many_values)
"""The doubts, each a pure function of the answer case giving what it saw (or None), in the
order the model reads them."""


def _as_check(doubt: Callable[[AnswerCase], str | None]) -> AnswerCheck:
    def check(case: AnswerCase) -> Reason | None:
        text = doubt(case)
        return None if text is None else Reason("doubtful", text, doubt.__name__)

    check.__name__ = check.__qualname__ = f"doubt_{doubt.__name__}"
    check.__doc__ = doubt.__doc__
    return check


DOUBT_CHECKS: tuple[AnswerCheck, ...] = tuple(_as_check(doubt) for doubt in DOUBTS)
"""The doubts as answer checks: each reason has the key ``doubtful`` and the doubt's name as
its kind, so each doubt is sent back once (:attr:`.Reason.account`)."""


def doubtful(case: AnswerCase) -> Reason | None:
    """The first doubt found, as a reason (or None)."""
    for check in DOUBT_CHECKS:
        if (reason := check(case)) is not None:
            return reason
    return None


def _items_asked(question: str) -> int | None:
    for pattern in _LIST_RES:
        found = pattern.search(question)
        if found is not None:
            word = found.group(1).lower()
            n = int(word) if word.isdigit() else _NUMBER_WORDS[word]
            return n if 2 <= n <= 20 else None
    return None


def _items_given(answer: str) -> int:
    """How many items the answer lists: an ``@name[...]`` value's items, else the answer's."""
    values = re.findall(r"@\w+\[(.*?)\]", answer, flags=re.S)
    text = max(values, key=len) if values else answer.strip()[:400]
    listed = len([part for part in _ITEM_SPLIT.split(text) if part.strip(" .[]'\"`*")])
    return max(listed, len(values))  # "the top three features": @feature1[..] @feature2[..] @feature3[..]


__all__ = ["DOUBTS", "DOUBT_CHECKS", "doubtful", "outliers_most", "p_value_disagrees", "same_for_each",
           "short_list", "whole_or_nothing", "whole_table"]
