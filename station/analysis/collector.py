"""Python's cyclic garbage collector, asked to run rarely while a campaign is analysed and reported.

An analysis allocates millions of short-lived containers (batches as dicts of arrays, pandas'
frames, matplotlib's artists), nearly all freed by reference counting the moment they are done
with. With the default thresholds (a young-generation pass every 700 allocations) a seed-scale
report made ~600 young passes and 5 full ones over the million objects the imports leave (pandas,
matplotlib, pydantic, numba): ~0.3 s, and each pass holds the GIL, stopping the run analysed in the
other thread meanwhile. Rarer passes still free the cycles a report makes (a figure and its
artists): young cycles go at the next young pass, as before.

Scoped in time, not in space: a long-lived process (`station monitor`, a notebook) keeps its own
thresholds between reports, but during one the thresholds are the whole process's (its other
threads collect rarely too). Nested or concurrent scopes restore the thresholds found on first
entry once the last one leaves.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# a young pass every 50 000 allocations (a batch's worth of containers), the middle generation
# every 20 of those, the whole heap practically never within one report
RARE = (50_000, 20, 100)

_lock = threading.Lock()
_inside = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def rare_collections() -> Iterator[None]:
    """Collect cyclic garbage at RARE thresholds within the block; the previous ones after it."""
    global _inside, _saved
    with _lock:
        if _inside == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*RARE)
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
