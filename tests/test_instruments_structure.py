"""The shape of the instruments package: imports point one way (no cycle, the interface
loads without the VISA layer), no private name crosses a module boundary, and every
registered dialect is a Scope the simulator can play."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from instruments.dialects import DIALECTS, dialect_class
from instruments.scope import Scope, open_scope
from instruments.scpi import ScpiScope
from instruments.sim.server import DIALECTS as SIMULATED

PACKAGE = Path(__file__).resolve().parents[1] / "instruments"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) for every import of an `instruments` module, at any depth of the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("instruments"):
            names = [a.name for a in node.names]
            # "from instruments import scpi" imports a module, not a name
            submodules = [n for n in names if (PACKAGE / f"{n}.py").exists() or (PACKAGE / n).is_dir()]
            if node.module == "instruments" and submodules:
                found += [(f"instruments.{n}", []) for n in submodules]
            else:
                found.append((node.module, names))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.startswith("instruments")]
    return found


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_no_import_cycle() -> None:
    # the package __init__ re-exports from its modules: that is the top of the graph, not a cycle
    graph = {
        name: {m for m, _ in imports(path) if m in MODULES and m != "instruments"} for name, path in MODULES.items()
    }
    done: set[str] = set()

    def visit(node: str, stack: list[str]) -> None:
        if node in stack:
            pytest.fail("import cycle: " + " -> ".join([*stack[stack.index(node) :], node]))
        if node in done:
            return
        for dep in sorted(graph[node]):
            visit(dep, [*stack, node])
        done.add(node)

    for name in sorted(graph):
        visit(name, [])
    assert "instruments.scpi" not in graph["instruments.scope"]
    assert graph["instruments.dialects"] == set()


def test_no_private_name_is_imported_across_modules() -> None:
    crossing = [
        f"{module_name(path)}: from {module} import {name}"
        for path in MODULES.values()
        for module, names in imports(path)
        for name in names
        if name.startswith("_")
    ]
    assert crossing == []


def test_the_interface_loads_without_the_visa_layer() -> None:
    code = "import sys, instruments.scope, instruments.pulses; print(sorted(m for m in sys.modules if 'visa' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_registered_dialect_is_a_scope_the_sim_plays(dialect: str) -> None:
    cls = dialect_class(dialect)
    assert issubclass(cls, ScpiScope) and issubclass(cls, Scope)
    assert dialect in SIMULATED


def test_unknown_dialect_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown scope dialect 'rigol'.*keysight_infiniivision"):
        open_scope("TCPIP::127.0.0.1::1::SOCKET", dialect="rigol")
