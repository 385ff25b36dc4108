"""Run kinds: one package each (station/kinds/<kind>/), registered in station/kind_registry.py.

Every kind shares one lifecycle (station/campaign/run.py): preflight cleanup → baseline
→ loads → start → measure → stop → loads stopped → seal. A kind's measurement
fills in the middle and declares the files it writes to the store (`outputs`) and
how they become Parquet at seal time (`conversions`); its package's `KIND` says the
rest (settings, cells, checks, bench needs, analysis, report section).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from station import kind_registry

if TYPE_CHECKING:
    from station.kinds.base import Measurement


def kind_for(name: str) -> type[Measurement]:
    """The measurement class of a registered kind (KeyError names the known ones)."""
    return kind_registry.kind(name).load("measurement")
