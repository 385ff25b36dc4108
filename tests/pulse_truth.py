"""The event behind each scope pulse, from a twin run's truth alone (no station code): the test
side of "a pair is right" by identity, not by a width that happens to agree."""

from __future__ import annotations

import numpy as np
import pandas as pd


def pulse_events(hw: pd.DataFrame, truth: pd.DataFrame, period_ns: int, match_ns: float,
                 scope_per_target: float) -> np.ndarray:
    """The seq of the twin's event behind each scope pulse (hw's rows), from the truth alone
    (`truth`: row i is event i, with rise_ns and hw_ns).

    Within an acquisition the pulses are events k = start spacing / period apart; the one run of
    the twin's events whose rises are spaced as the pulses' starts (scaled by the scope's timebase
    over the target's clock, `scope_per_target`) and whose widths fall − rise are the pulses'
    widths, each within match_ns, is the acquisition's. Every acquisition must have exactly one:
    the truth's pairing is complete, or the test says where it is not. Where the twin logged each
    rise on the scope's timebase (`rise_scope_ns`: through the target clock's drift and slews), the
    spacings are taken there, unscaled."""
    if "rise_scope_ns" in truth:
        rise, scope_per_target = truth["rise_scope_ns"].to_numpy(np.float64), 1.0
    else:
        rise = truth["rise_ns"].to_numpy(np.float64)
    width = truth["hw_ns"].to_numpy(np.float64)
    start_ns, width_ns = hw["start_s"].to_numpy() * 1e9, hw["width_s"].to_numpy() * 1e9
    seq = np.full(len(hw), -1, np.int64)
    for acq, rows in hw.groupby("acquisition").indices.items():
        rows = rows[np.argsort(start_ns[rows], kind="stable")]
        offset = start_ns[rows] - start_ns[rows[0]]
        k = np.rint(offset / period_ns).astype(np.int64)
        first = np.arange(max(len(rise) - int(k[-1]), 0))
        for ki, off, w in zip(k, offset, width_ns[rows], strict=True):
            first = first[(np.abs(width[first + ki] - w) <= match_ns)
                          & (np.abs((rise[first + ki] - rise[first]) * scope_per_target - off) <= match_ns)]
        assert len(first) == 1, f"acquisition {acq}: {len(first)} runs of events match its {len(rows)} pulses"
        seq[rows] = first[0] + k
    return seq


def pairs_right(pairs: pd.DataFrame, hw: pd.DataFrame, behind: np.ndarray) -> np.ndarray:
    """Whether each pair's record (`seq`) is the one behind its pulse (`behind`: per hw row, the seq
    of its event, from pulse_events). A pair names its pulse by acquisition and width: pulses of one
    acquisition with the very same width are one key (swapping two gives the same pairs), so a pair
    is right when its record is behind one of them."""
    keyed = hw.assign(behind=behind, hw_ns=hw["width_s"].to_numpy() * 1e9)
    pulses = keyed.groupby(["acquisition", "hw_ns"])["behind"].agg(frozenset)
    keys = pd.MultiIndex.from_frame(pairs[["acquisition", "hw_ns"]])
    assert keys.isin(pulses.index).all(), "a paired pulse is not among the run's pulses"
    return np.array([s in ev for s, ev in zip(pairs["seq"], pulses.loc[keys], strict=True)], dtype=bool)
