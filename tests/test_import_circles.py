"""No import circles in kernel_analyst, and the rooms of kernels/ import one way.

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


def _part(module: str) -> str | None:
    if module in VALUES:
        return "values"
    return next((room for room in MAY_IMPORT if room != "values" and
                 (module == room or module.startswith(room + "."))), None)


def test_the_rooms_of_kernels_import_one_way() -> None:
    wrong = []
    for module, targets in _graph().items():
        part = _part(module)
        if part is None:
            continue
        for target in targets:
            if target.startswith(K + ".") and not any(target == ok or target.startswith(ok + ".")
                                                      for ok in MAY_IMPORT[part]):
                wrong.append(f"{module} -> {target}")
    faces = [p for p in ROOT.joinpath("kernels").rglob("__init__.py")]
    for face in faces:  # a room's face may re-export only its own room (and values)
        me = _module_name(face)
        part = _part(me)
        if part is None or part == "values":
            continue
        files = {_module_name(p) for p in ROOT.rglob("*.py")}
        for target, _ in _imports(face, files | {me}):
            if target.startswith(K + ".") and not any(target == ok or target.startswith(ok + ".")
                                                      for ok in MAY_IMPORT[part]):
                wrong.append(f"{me} (face) -> {target}")
    assert not wrong, "imports against the rooms' one-way doors:\n" + "\n".join(sorted(wrong))


def test_kernels_never_imports_the_agent_cli_or_server() -> None:
    outside = (f"{PACKAGE}.agent", f"{PACKAGE}.cli", f"{PACKAGE}.server", f"{PACKAGE}.frontend")
    wrong = [f"{module} -> {target}" for module, targets in _graph().items() if module.startswith(K + ".")
             for target in targets if target.startswith(outside)]
    assert not wrong, "\n".join(wrong)
