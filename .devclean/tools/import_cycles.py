"""Import cycles between the modules of a package, counting imports inside functions too.

    .venv/bin/python tools/import_cycles.py packages/capture/src/capture/interp [--fail]

Reads every module under the folder with `ast` (nothing is imported), records which modules
of the same folder each one imports (at module level, inside functions, or under
`TYPE_CHECKING`), and prints the strongly connected components of more than one module: each
is a cycle held together somewhere. Imports under `if TYPE_CHECKING:` are listed apart and not
counted: they never run. With `--fail` the exit status is 1 when a cycle remains.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def _module_name(root: Path, path: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module, module: str, is_package: bool) -> list[tuple[str, bool]]:
    """(imported module or `module.name`, under TYPE_CHECKING) for every import statement."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, typing_only)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, typing_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            # NOTE: `from pkg import sub` is an edge to `sub` (or to `pkg` when `sub` is a
            # name defined in pkg: `import_graph` falls back to the parent).
            found.extend((f"{base}.{alias.name}", typing_only) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child, typing_only)

    visit(tree, False)
    return found


def import_graph(folder: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(runtime edges, TYPE_CHECKING-only edges) between the modules under `folder`."""
    folder = folder.resolve()
    # NOTE: the package name is the folder path below the first folder without __init__.py.
    root = folder
    while (root.parent / "__init__.py").exists():
        root = root.parent
    package_root = root.parent
    modules = {_module_name(package_root, p, ""  # joined below
                            ).lstrip("."): p for p in sorted(folder.rglob("*.py"))}
    runtime: dict[str, set[str]] = {m: set() for m in modules}
    typing: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for target, typing_only in _imports(tree, name, path.name == "__init__.py"):
            hit = target if target in modules else target.rpartition(".")[0]
            if hit in modules and hit != name:
                (typing if typing_only else runtime)[name].add(hit)
    return runtime, typing


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(1000, 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the import cycles of the folder's modules; 1 with --fail when one remains."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--fail", action="store_true", help="exit 1 when a cycle remains")
    args = parser.parse_args(argv)
    runtime, _ = import_graph(args.folder)
    found = cycles(runtime)
    edges = sum(len(v) for v in runtime.values())
    print(f"{len(runtime)} modules, {edges} import edges, {len(found)} cycle(s)")
    for component in found:
        print(f"cycle of {len(component)} modules:")
        members = set(component)
        for module in component:
            inside = sorted(runtime[module] & members)
            print(f"  {module} -> {', '.join(m.rpartition('.')[2] for m in inside)}")
    return 1 if args.fail and found else 0


if __name__ == "__main__":
    raise SystemExit(main())
