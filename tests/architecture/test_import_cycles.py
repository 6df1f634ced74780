"""No import circle among the modules of `incidents/`, `correlate/` and `rootline/` taken together.

Every import counts, function-local ones included (a circle hidden inside a function is still a
circle: it only moves the failure to the first call), except those under `if TYPE_CHECKING:`.
Read from the source with `ast`, so nothing is imported to check it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("incidents", "correlate", "rootline")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                modules[module_name(path)] = path
    return modules


def type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(
    tree: ast.AST, module: str, is_package: bool, known: set[str] | frozenset[str] = frozenset()
) -> set[str]:
    """Every module name an import statement in `tree` names, outside `if TYPE_CHECKING:`.
    `from pkg import mod` names `pkg.mod` (not `pkg` too) when `mod` is one of the `known`
    modules, as import-linter reads it; `from pkg import name` names `pkg`."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            submodules = {f"{base}.{alias.name}" for alias in node.names} & set(known)
            names.update(submodules)
            if len(submodules) < len(node.names):
                names.add(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph = {}
    for name, path in modules.items():
        imported = imported_names(
            ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py", set(modules)
        )
        graph[name] = {target for target in imported if target in modules and target != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_among_the_project_modules():
    found = circles(import_graph(project_modules()))
    assert found == [], "import circles (each a set of modules that import each other):\n" + "\n".join(
        " <-> ".join(component) for component in found
    )


def test_the_circle_finder_sees_function_local_imports_and_skips_type_checking_ones():
    source_a = "def f():\n    from pkg import b\n"
    source_b = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\nimport pkg.a\n"
    source_c = "import pkg.b\n"
    modules = {"pkg.a": source_a, "pkg.b": source_b, "pkg.c": source_c}
    graph = {
        name: {
            t
            for t in imported_names(ast.parse(text), name, False, set(modules))
            if t in modules and t != name
        }
        for name, text in modules.items()
    }
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.b"}}
    assert circles(graph) == [["pkg.a", "pkg.b"]]
