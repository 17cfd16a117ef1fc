"""The person's data stays what the person asked for.

A small model answers "of the remaining JFK departures, what percent left late?" with
``df = df[df['origin'] == 'JFK']; df = df[df['dep_delay'] > 15]`` and every later answer of
the conversation runs on 8,000 rows instead of 336,776. A notice after the step is no
guard (the model answered anyway). So a step that leaves a DataFrame that existed before
the question with fewer rows or columns, or rebinds or deletes it, is undone when the
question does not ask to change the data (:mod:`.intent`), and the model is told to work
under a new name; when the question does ask, the change is kept and the next question's
note says what the table holds now.

:func:`table_changes` reads what a step did from its variable changes (no kernel); the
judge decides (:meth:`~kernel_analyst.agent.feedback.judge.Judge.after_step`).
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ...kernels import VariableInfo
from ..prompting import message
from ..results import TableChange
from .checks import called_name, syntax_nodes
from .decisions import Reason, StepFacts

_FRAME = "DataFrame"


def table_changes(step: StepFacts, before: Mapping[str, VariableInfo]) -> list[TableChange]:
    """The DataFrames of ``before`` (the question's start) the step shrank, grew (read
    again: the conversation benchmark's tips, ``df = pd.read_csv('tips.csv')`` in the third
    question, the first one's "from now on, only dinners" gone), replaced by something
    else, or deleted; nothing for a step that failed or did not run."""
    ex = step.execution
    if not step.observed or ex.status != "ok":
        return []
    found = []
    for info in ex.variables.changed:
        old = before.get(info.name)
        if old is None or not old.shape:
            continue
        rows = info.shape[0] if info.shape and info.type.endswith(_FRAME) else None
        dropped = tuple(c for c in (old.columns or []) if info.columns is not None and c not in info.columns)
        if rows is None or rows != old.shape[0] or dropped:
            found.append(TableChange(info.name, old.shape[0], rows, dropped if rows is not None else (),
                                     ex.execution_count, _line(step.code, info.name)))
    for name in ex.variables.deleted:
        old = before.get(name)
        if old is not None and old.shape:
            line = _line(step.code, name)
            found.append(TableChange(name, old.shape[0], None, (), ex.execution_count, line))
    return found


def undone(changes: list[TableChange], step: int, code: str = "") -> Reason:
    """What the model is told when the step that changed the person's tables was undone
    (``code``: the step's, to tell a file read again)."""
    first = changes[0]
    if read_again(changes, code):
        assert first.rows is not None
        return Reason("data_undone", message("data_grown", step=step, name=first.name,
                                             before=f"{first.rows_before:,}", after=f"{first.rows:,}"))
    after = f"{first.rows:,} rows" if first.rows is not None else "something else"
    if first.rows is not None and first.rows == first.rows_before and first.columns_dropped:
        after = f"a copy without the columns {', '.join(first.columns_dropped[:6])}"
    text = message("data_undone", step=step, name=first.name, before=f"{first.rows_before:,}", after=after,
                   example=_example(first))
    return Reason("data_undone", text)


def read_again(changes: Sequence[TableChange], code: str) -> bool:
    """The step read the first table's file again into it, and the table has more rows than
    the question began with: the changes kept earlier are gone, and no new name mends that
    (the copy is as wrong). A table grown otherwise (``pd.concat``) may go on as a copy."""
    first = changes[0] if changes else None
    if first is None or first.rows is None or first.rows <= first.rows_before:
        return False
    return any(isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
               and called_name(node.value.func).startswith("read_")
               and any(isinstance(t, ast.Name) and t.id == first.name for t in node.targets)
               for node in syntax_nodes(code) or [])


def kept(changes: list[TableChange]) -> Reason:
    """What the model is told when the question asked for the change: it stays."""
    return Reason("data_kept", message("data_kept", changes="; ".join(c.describe() for c in changes)))


@dataclass(frozen=True)
class Renamed:
    """A step's code with the person's tables it changed renamed (:func:`renamed`)."""

    code: str
    """The code as it runs: each new name bound to its table first, then the step's code
    with every use of the table's name (read, write, ``del``, ``global``) changed to the new
    one; a function whose parameter has the name keeps it."""
    names: dict[str, str]
    """The table's name -> the new name."""

    def describe(self) -> str:
        """``df`` renamed ``df_work`` (and ...)."""
        return " and ".join(f"`{old}` renamed `{new}`" for old, new in self.names.items())

    def listed(self) -> tuple[str, str]:
        """The tables' names and their new names as the notes write them: ```df`, `tips```
        and ```df_work`, `tips_work```."""
        return (", ".join(f"`{old}`" for old in self.names),
                ", ".join(f"`{new}`" for new in self.names.values()))


def renamed(code: str, names: Sequence[str], taken: Collection[str]) -> Renamed | None:
    """``code`` with the tables ``names`` renamed to names not in ``taken`` (``df`` ->
    ``df_work``): what it computes is the same, and the tables stay as they were. None when
    the code does not parse or does not use them. The code keeps its comments and layout:
    each use of a name is replaced where it stands; where that cannot be shown to give the
    same statements (a ``global`` line, a position Python reports wrongly), the code is
    written out again from its syntax tree, without comments."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    chosen: dict[str, str] = {}
    for name in names:
        if name not in used or name in chosen:
            continue
        new, k = f"{name}_work", 2
        while new in taken or new in used or new in chosen.values():
            new, k = f"{name}_work{k}", k + 1
        chosen[name] = new
    if not chosen:
        return None
    rename = _Rename(chosen)
    tree = rename.visit(tree)
    bound = "".join(f"{new} = {old}\n" for old, new in chosen.items())
    body = _spliced(code, rename.spans, tree) or ast.unparse(tree)
    return Renamed(bound + body.rstrip("\n") + "\n", chosen)


def _spliced(code: str, spans: list[tuple[int, int, int, str, str]], renamed: ast.AST) -> str | None:
    """``code`` with each span (line, start and end byte column, old name, new name)
    replaced in place; None unless every span holds its old name and the result parses to
    exactly the ``renamed`` tree."""
    lines = code.splitlines(keepends=True)
    edited = [line.encode() for line in lines]
    for lineno, start, end, old, new in sorted(spans, key=lambda s: (s[0], -s[1])):
        if not 0 < lineno <= len(edited) or edited[lineno - 1][start:end] != old.encode():
            return None
        line = edited[lineno - 1]
        edited[lineno - 1] = line[:start] + new.encode() + line[end:]
    text = b"".join(edited).decode()
    try:
        same = ast.dump(ast.parse(text)) == ast.dump(renamed)
    except SyntaxError:
        return None
    return text if same else None


class _Rename(ast.NodeTransformer):
    """Renames module-level names, leaving functions whose parameters shadow them alone."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.spans: list[tuple[int, int, int, str, str]] = []
        """Where each renamed use stands: line, start and end byte column, old, new name."""

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.names:
            new = self.names[node.id]
            if node.end_col_offset is not None:
                self.spans.append((node.lineno, node.col_offset, node.end_col_offset, node.id, new))
            node.id = new
        return node

    def visit_Global(self, node: ast.Global) -> ast.Global:
        node.names = [self.names.get(n, n) for n in node.names]  # no column per name: not spliced
        return node

    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> ast.AST:
        args = node.args
        params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
                  if a is not None}
        outer = self.names
        self.names = {old: new for old, new in outer.items() if old not in params}
        try:
            return self.generic_visit(node)
        finally:
            self.names = outer

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scope


def _line(code: str, name: str) -> str:
    """The line of ``code`` that changed ``name`` (an assignment to it, an in-place call on
    it, a ``del``): the last such line, cut to 80 characters."""
    lines = code.splitlines()
    found = ""
    for node in syntax_nodes(code) or []:
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.Expr)) and any(
                isinstance(n, ast.Name) and n.id == name for n in ast.walk(node)):
            if isinstance(node, ast.Expr) and not _in_place(node):
                continue
            text = lines[node.lineno - 1].strip() if 0 < node.lineno <= len(lines) else ""
            found = text if len(text) <= 80 else text[:77] + "..."
    return found


def _in_place(node: ast.Expr) -> bool:
    return isinstance(node.value, ast.Call) and any(k.arg == "inplace" for k in node.value.keywords)


def _example(change: TableChange) -> str:
    """A way to keep the step's result under a new name: ``subset = df[...]``."""
    target = f"{change.name} = "
    if change.code.startswith(target):
        return f"subset = {change.code[len(target):]}"
    return f"subset = {change.name}[...]"


__all__ = ["Renamed", "kept", "read_again", "renamed", "table_changes", "undone"]
