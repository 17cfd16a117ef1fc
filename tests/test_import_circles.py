"""No import circles in kernel_analyst, and the rooms of kernels/ and agent/ import one way.

The circles are found the way ``import-circles.py`` (the project's tool) finds them:
every module's imports read with ``ast`` (nothing is run), relative and absolute ones
resolved inside the package, imports under ``if TYPE_CHECKING:`` counted too (a loop of
type hints still ties two modules), a package's ``__init__`` not counted (its imports
re-export a face). A circle fails with the names that tie it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import kernel_analyst

ROOT = Path(kernel_analyst.__file__).resolve().parent
PACKAGE = ROOT.name


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, modules: set[str], root: Path = ROOT) -> Iterator[tuple[str, str]]:
    """(imported module, name taken from it) for each import of a module of the package."""
    me = _module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                target = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:
                    yield f"{target}.{alias.name}", "(module)"
                elif target in modules:
                    yield target, alias.name
        elif isinstance(node, ast.Import):
            yield from ((alias.name, "(module)") for alias in node.names if alias.name in modules)


def _graph(root: Path = ROOT) -> dict[str, dict[str, set[str]]]:
    """Module -> the modules it imports (package faces left out) -> the names it takes."""
    files = [p for p in root.rglob("*.py") if "__pycache__" not in p.parts]
    modules = {_module_name(p, root) for p in files}
    packages = {m for m in modules if any(other.startswith(m + ".") for other in modules)}
    graph: dict[str, dict[str, set[str]]] = {}
    for path in files:
        if path.name == "__init__.py":
            continue
        me = _module_name(path, root)
        for target, name in _imports(path, modules, root):
            if target != me and target not in packages:
                graph.setdefault(me, {}).setdefault(target, set()).add(name)
    return graph


def _circles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles() -> None:
    graph = _graph()
    circles = _circles(graph)
    described = ["\n".join(f"  {a} -> {b}: {', '.join(sorted(graph[a][b]))}"
                           for a in group for b in group if b in graph.get(a, {})) for group in circles]
    assert not circles, f"{len(circles)} import circle(s):\n" + "\n".join(described)


def test_the_checker_finds_a_circle_of_type_hints(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .a import A\nfrom .b import B\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from .sub.c import C\nclass A: ...\n")
    (package / "sub" / "c.py").write_text("from ..b import B\nclass C: ...\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from . import a\nclass B: ...\n")
    graph = _graph(package)
    assert _circles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    assert graph["pkg.b"] == {"pkg.a": {"(module)"}}, "types-only imports count"
    (package / "b.py").write_text("class B: ...\n")
    assert _circles(_graph(package)) == [], "package faces (__init__) do not count"


K = f"{PACKAGE}.kernels"
# What each part of kernels/ may import of kernels/ (docs/architecture.md). Value modules
# import none of the rooms; launch knows nothing of conversations; trail talks to kernels
# only through the callables it is given; the modules above the rooms use anything.
VALUES = {f"{K}.{m}" for m in
          ("exceptions", "limits", "allowlist", "execution", "endings", "recovery", "files", "_clock")}
MAY_IMPORT = {
    "values": VALUES,
    f"{K}.launch": VALUES | {f"{K}.launch"},
    f"{K}.trail": VALUES | {f"{K}.trail"},
    f"{K}.conversation": VALUES | {f"{K}.launch", f"{K}.trail", f"{K}.conversation"},
}

A = f"{PACKAGE}.agent"
# The same for agent/ (docs/architecture.md): values at the top import no room; models and
# tools only values; briefing may use tools (a run's note); the judge (feedback) reads what a
# directive is (tools) and an upload (briefing) but never the loop; the loop uses every room.
# The face (analyst), testing and the earlier paths (_earlier) are above the rooms.
AGENT_VALUES = {f"{A}.{m}" for m in ("results", "events", "exceptions", "prompting", "protocols")}
AGENT_MAY_IMPORT = {
    "values": AGENT_VALUES,
    f"{A}.models": AGENT_VALUES | {f"{A}.models"},
    f"{A}.tools": AGENT_VALUES | {f"{A}.tools"},
    f"{A}.briefing": AGENT_VALUES | {f"{A}.tools", f"{A}.briefing"},
    f"{A}.feedback": AGENT_VALUES | {f"{A}.tools", f"{A}.briefing", f"{A}.feedback"},
    f"{A}.loop": AGENT_VALUES | {f"{A}.models", f"{A}.tools", f"{A}.briefing", f"{A}.feedback", f"{A}.loop"},
}


def _part(module: str, values: set[str], rooms: dict[str, set[str]]) -> str | None:
    if module in values:
        return "values"
    return next((room for room in rooms if room != "values" and
                 (module == room or module.startswith(room + "."))), None)


def _against_the_doors(package: str, values: set[str], rooms: dict[str, set[str]]) -> list[str]:
    """Imports of ``package`` by its own rooms that their doors do not allow (faces included:
    a room's face may re-export only what the room itself may import)."""
    wrong = _wrong_edges(_graph(), package, values, rooms)
    files = {_module_name(p) for p in ROOT.rglob("*.py")}
    for face in ROOT.joinpath(*package.split(".")[1:]).rglob("__init__.py"):
        me = _module_name(face)
        part = _part(me, values, rooms)
        if part is None or part == "values":
            continue
        wrong += [f"{me} (face) -> {target}" for target, _ in _imports(face, files | {me})
                  if not _allowed(package, rooms[part], target)]
    return sorted(wrong)


def _allowed(package: str, doors: set[str], target: str) -> bool:
    inside = target.startswith(package + ".")
    return not inside or any(target == ok or target.startswith(ok + ".") for ok in doors)


def _wrong_edges(graph: dict[str, dict[str, set[str]]], package: str, values: set[str],
                 rooms: dict[str, set[str]]) -> list[str]:
    return [f"{module} -> {target}" for module, targets in graph.items()
            if (part := _part(module, values, rooms)) is not None
            for target in targets if not _allowed(package, rooms[part], target)]


def test_the_rooms_of_kernels_import_one_way() -> None:
    wrong = _against_the_doors(K, VALUES, MAY_IMPORT)
    assert not wrong, "imports against the rooms' one-way doors:\n" + "\n".join(wrong)


def test_the_rooms_of_the_agent_import_one_way() -> None:
    wrong = _against_the_doors(A, AGENT_VALUES, AGENT_MAY_IMPORT)
    assert not wrong, "imports against the agent rooms' one-way doors:\n" + "\n".join(wrong)
    top = sorted(p.name for p in ROOT.joinpath("agent").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 10, f"agent/ has {len(top)} modules at its top level: {top}"


def test_the_door_check_finds_a_wrong_import() -> None:
    graph = {f"{A}.feedback.judge": {f"{A}.loop.state": {"Turn"}, f"{A}.results": {"Step"}},
             f"{A}.loop.answer": {f"{A}.feedback.judge": {"Judge"}}, f"{A}.results": {f"{A}.tools": {"X"}}}
    assert _wrong_edges(graph, A, AGENT_VALUES, AGENT_MAY_IMPORT) == [
        f"{A}.feedback.judge -> {A}.loop.state", f"{A}.results -> {A}.tools"]


def test_kernels_never_imports_the_agent_cli_or_server() -> None:
    outside = (A, f"{PACKAGE}.cli", f"{PACKAGE}.server", f"{PACKAGE}.frontend")
    wrong = [f"{module} -> {target}" for module, targets in _graph().items() if module.startswith(K + ".")
             for target in targets if target.startswith(outside)]
    assert not wrong, "\n".join(wrong)


def test_the_agent_never_imports_the_cli_server_or_front_ends() -> None:
    outside = (f"{PACKAGE}.cli", f"{PACKAGE}.server", f"{PACKAGE}.frontend")
    wrong = [f"{module} -> {target}" for module, targets in _graph().items() if module.startswith(A + ".")
             for target in targets if target.startswith(outside)]
    assert not wrong, "\n".join(wrong)
