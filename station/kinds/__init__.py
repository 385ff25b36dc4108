"""Run kinds: what a run measures between "loads started" and "stop for sure".

Every kind shares one lifecycle (station/run.py): preflight cleanup → baseline
→ loads → start → measure → stop → loads stopped → seal. A kind fills in the
middle and declares the files it writes to the store (`outputs`) and how they
become Parquet at seal time (`conversions`). A new kind is one module here
plus one `register` call.
"""

from __future__ import annotations

from station.kinds.base import Measurement, RunContext, register, registered

__all__ = ["Measurement", "RunContext", "kind_for", "register", "registered"]


def kind_for(name: str) -> type[Measurement]:
    # the built-in kinds register themselves on import
    import station.kinds.cyclictest_run  # noqa: F401
    import station.kinds.gpio_run  # noqa: F401
    import station.kinds.interruptions_run  # noqa: F401
    import station.kinds.module_run  # noqa: F401

    kinds = registered()
    if name not in kinds:
        raise KeyError(f"unknown run kind {name!r} (known: {', '.join(sorted(kinds))})")
    return kinds[name]
