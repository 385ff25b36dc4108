"""A package's import graph read from its source (ast, imports at any depth of a file, the
TYPE_CHECKING ones too): what the structure tests check for cycles and upward imports."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(package: str) -> dict[str, Path]:
    return {module_name(p): p for p in sorted((REPO / package).rglob("*.py"))}


def imports(path: Path, package: str) -> list[tuple[str, list[str]]]:
    """(module, names) for every import of a `package` module; "from pkg import sub" names the
    submodule itself, not a name in pkg."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == package:
            names = [a.name for a in node.names]
            base = REPO.joinpath(*node.module.split("."))
            submodules = [n for n in names if (base / f"{n}.py").exists() or (base / n).is_dir()]
            found += [(f"{node.module}.{n}", []) for n in submodules]
            if len(submodules) < len(names):
                found.append((node.module, [n for n in names if n not in submodules]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.split(".")[0] == package]
    return found


def graph(package: str, *, skip_root: bool = True) -> dict[str, set[str]]:
    """module → the package's modules it imports (a package's own __init__, which re-exports from
    its modules, is left out when skip_root: it is the top of the graph, not a cycle)."""
    modules = package_modules(package)
    return {name: {m for m, _ in imports(path, package) if m in modules and m != name
                   and not (skip_root and m == package)}
            for name, path in modules.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path (first node repeated at the end), or None."""
    done: set[str] = set()

    def visit(node: str, stack: list[str]) -> list[str] | None:
        if node in stack:
            return [*stack[stack.index(node):], node]
        if node in done:
            return None
        for dep in sorted(edges.get(node, ())):
            found = visit(dep, [*stack, node])
            if found:
                return found
        done.add(node)
        return None

    for name in sorted(edges):
        found = visit(name, [])
        if found:
            return found
    return None
