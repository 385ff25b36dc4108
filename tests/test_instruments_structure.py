"""The shape of the instruments package: imports point one way (no cycle, the interface
loads without the VISA layer), no private name crosses a module boundary, and every
registered dialect is a Scope the simulator can play."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from instruments.dialects import DIALECTS, dialect_class
from instruments.scope import Scope, open_scope
from instruments.scpi import ScpiScope
from instruments.sim.server import DIALECTS as SIMULATED
from tests.import_graph import cycle, graph, imports, module_name, package_modules

PACKAGE = Path(__file__).resolve().parents[1] / "instruments"
MODULES = package_modules("instruments")


def test_no_import_cycle() -> None:
    edges = graph("instruments")
    found = cycle(edges)
    assert found is None, "import cycle: " + " -> ".join(found or [])
    assert "instruments.scpi" not in edges["instruments.scope"]
    assert edges["instruments.dialects"] == set()


def test_no_private_name_is_imported_across_modules() -> None:
    crossing = [
        f"{module_name(path)}: from {module} import {name}"
        for path in MODULES.values()
        for module, names in imports(path, "instruments")
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
