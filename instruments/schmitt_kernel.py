"""The code path's Schmitt walk, compiled (numba), for long records whose edges are dense.

The numpy code path (instruments/pulses.py, `_CodeRecord.edges`) reads a record in passes:
each block's lowest and highest code, then every block where the band may change, copied and
compared 8 samples at a time. On a record with an edge every few thousand samples most blocks
hold one, and the passes cost about twice a copy of the record. Here one pass does it: while the
trigger's state is known, a block of samples is reduced to its lowest (or highest) code in a loop
the compiler vectorises, and only a block that holds a sample of the other band is walked
sample by sample. The result is the same list of transitions as the numpy path's — for each,
the last sample on the old side of the threshold before it, and whether it rises — from which
pulses.py computes the edge positions with the same float operations: the same edges, to the
bit (tests/test_pulses_kernel.py).

Without numba (or with IRQ_STATION_KERNEL=numpy) the numpy path runs (instruments/compiled.py);
`available()` says which one will. Codes whose volts grow with the code only (a scale with positive
volts per code); anything else stays on the numpy path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from instruments.compiled import Compiled

BLOCK = 256  # samples reduced at a time while the state is known (a walk reads at most this many)
MIN_SAMPLES = 1 << 20  # shorter records: the numpy path is fast enough, and numba is not imported
FIRST_ROOM = 4096  # transitions the walk is given room for at first (then 4 times more each time)


def available() -> str | None:
    """None if the compiled walk can run, else why not (the numpy path runs)."""
    return _walk.available()


def path_for(points: int) -> str:
    """Which path extracts a record of `points` codes, said as a bench or a log would say it."""
    if points < MIN_SAMPLES:
        return f"numpy (records under {MIN_SAMPLES:,} samples)"
    why = available()
    return "compiled (numba)" if why is None else f"numpy ({why})"


def transitions(codes: np.ndarray, up: int, down: int, below: int, above: int) -> tuple[np.ndarray,
                                                                                        np.ndarray]:
    """For each Schmitt transition: the last sample on the old side before it (k), and whether
    it rises. up: codes >= up are high; down: codes <= down are low; below: codes <= below are
    under the threshold; above: codes >= above are over it. Call `available()` first."""
    kind = codes.dtype.type
    bands = kind(up), kind(down), kind(below), kind(above)
    # the walk fills arrays it is given and stops when they are full (growing an array inside its
    # loop made every sample's step ~30 times slower): resumed here with larger ones
    ks, rises, i, state, room = [], [], 0, -1, FIRST_ROOM
    while i < len(codes):
        k_out, rise_out = np.empty(room, np.int64), np.empty(room, np.bool_)
        m, i, state = _walk(codes, *bands, i, state, k_out, rise_out)
        ks.append(k_out[:m])
        rises.append(rise_out[:m])
        room *= 4
    if not ks:
        return np.empty(0, np.int64), np.empty(0, bool)
    return np.concatenate(ks), np.concatenate(rises)


def _compile() -> Any:
    import numba

    jit = numba.njit(cache=True, nogil=True, boundscheck=False)

    # the skip, a function of its own: inlined into the walk's loop, LLVM left the block
    # reduction scalar (about 4 ns a sample); alone, it is vectorised (a fraction of one)
    @jit
    def next_block_to_walk(codes: Any, i: int, high: bool, up: Any, down: Any) -> int:
        """From i, the first block that holds a sample of the band opposite the state (high or
        low), or the record's last, shorter block."""
        n = codes.shape[0]
        while i + BLOCK <= n:
            blk = codes[i : i + BLOCK]
            lowest = highest = blk[0]
            for j in range(BLOCK):
                v = blk[j]
                lowest = v if v < lowest else lowest
                highest = v if v > highest else highest
            if (lowest <= down) if high else (highest >= up):
                return i
            i += BLOCK
        return i

    @jit
    def walk(codes: Any, up: Any, down: Any, below: Any, above: Any, i: int, state: int, ks: Any,
             rises: Any) -> tuple[int, int, int]:
        """From sample i in `state` (-1: unknown until the first band entry, which sets it; 0 low,
        1 high): the transitions into ks and rises until they are full or the record ends;
        returns (how many, where it stopped, the state there)."""
        n, room, m = codes.shape[0], ks.shape[0], 0
        while i < n and state < 0:
            c = codes[i]
            if c >= up:
                state = 1
            elif c <= down:
                state = 0
            i += 1
        while i < n and m < room:
            # blocks that hold no sample of the other band are reduced, not walked
            i = next_block_to_walk(codes, i, state == 1, up, down)
            end = min(i + BLOCK, n)
            while i < end and m < room:
                c = codes[i]
                if (state == 1 and c <= down) or (state == 0 and c >= up):
                    rising = state == 0
                    # the last sample on the old side: the old band's entry is one, so it is found
                    k = i - 1
                    if rising:
                        while codes[k] > below:
                            k -= 1
                    else:
                        while codes[k] < above:
                            k -= 1
                    ks[m] = k
                    rises[m] = rising
                    m += 1
                    state = 1 if rising else 0
                i += 1
        return m, i, state

    return walk


_walk = Compiled(_compile)
