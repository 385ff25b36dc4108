"""Two waveforms of one acquisition -> the delay from each stimulus edge to its response.

A GPIO response measurement records the stimulus (what drives the device's
input) and the response (the output the device drives in answer) on two
channels of one acquisition. Each stimulus edge of the chosen direction is
paired with the first response edge after it, if that edge comes within
`window_s` and before the next stimulus edge: a response that late belongs to
nothing the device was asked, and a stimulus without one is a miss — counted,
never dropped. A stimulus whose window the end of the record cuts short
without an answer is "censored": whether the device answered is unknown, so
it counts as neither. A stimulus with two response edges or more in its window
is "ambiguous" (an earlier stimulus's late answer, or a glitch, came first:
which one is its own cannot be told) and counts as neither, only counted.
Response edges that answer no stimulus are counted too (a slow answer past its
window, or a glitch). An echo responder answers a rise with a rise and a fall
with a fall: with `same_direction`, each direction is paired on its own.

The window must be shorter than the shortest interval between stimulus edges
(the campaign checks that it is below the stimulus period); otherwise a late
answer to one stimulus would be taken for a fast answer to the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from instruments.pulses import waveform_edges
from instruments.scope import Waveform

Edge = Literal["rise", "fall", "either"]
EDGES: tuple[str, ...] = ("rise", "fall", "either")


@dataclass(frozen=True, eq=False)
class Delays:
    """The stimulus edges of one acquisition and their delays (times relative to its trigger).

    `delay_s` is NaN where the device missed the stimulus; censored stimuli
    are not among the rows, only counted.
    """

    stimulus_s: np.ndarray
    delay_s: np.ndarray
    censored: int = 0
    ambiguous: int = 0  # stimuli with more than one response edge in their window
    unanswering: int = 0  # response edges that answer no stimulus
    index: int = 0  # the acquisition (Waveform.index)

    def __len__(self) -> int:
        return len(self.delay_s)

    @property
    def missed(self) -> int:
        return int(np.isnan(self.delay_s).sum())

    @property
    def answered(self) -> np.ndarray:
        """The delays of the stimuli that got an answer."""
        return self.delay_s[~np.isnan(self.delay_s)]


def edge_times(
    waveform: Waveform, edge: Edge, threshold: float | None = None, hysteresis: float | None = None
) -> np.ndarray:
    """Times (s, from the trigger) of the waveform's edges in direction `edge`.

    Threshold and hysteresis come from the record's own levels when not
    given (`auto_threshold`); a record with a single level has no edges.
    """
    if edge not in EDGES:
        raise ValueError(f"edge must be one of {EDGES}, got {edge!r}")
    rising, falling = waveform_edges(waveform, threshold, hysteresis)
    chosen = {"rise": rising, "fall": falling, "either": np.sort(np.concatenate([rising,
                                                                                 falling]))}[edge]
    return waveform.t0_s + chosen * waveform.dt_s


def pair_delays(
    stimulus_s: np.ndarray,
    response_s: np.ndarray,
    window_s: float,
    record_end_s: float,
    index: int = 0,
) -> Delays:
    """Pair sorted stimulus edge times with sorted response edge times (see the module's rules)."""
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s!r}")
    s = np.asarray(stimulus_s, dtype=np.float64)
    r = np.asarray(response_s, dtype=np.float64)
    # a response answers the latest stimulus before it, within the window
    limit = s + window_s
    limit[:-1] = np.minimum(limit[:-1], s[1:])
    first = np.searchsorted(r, s, side="right")
    following = np.full(len(s), np.inf)  # the first response edge after each stimulus edge
    exists = first < len(r)
    following[exists] = r[first[exists]]
    answered = following <= limit
    delay = np.where(answered, following - s, np.nan)
    # no answer yet, and the record ends before the window does: unknown, not missed
    censored = ~answered & (limit > record_end_s)
    ambiguous = np.searchsorted(r, limit, side="right") - first >= 2
    used = int((answered & ~ambiguous).sum())
    after_first = int(len(r) - np.searchsorted(r, s[0], side="right")) if len(s) else 0
    keep = ~censored & ~ambiguous
    return Delays(
        stimulus_s=s[keep],
        delay_s=delay[keep],
        censored=int(censored.sum()),
        ambiguous=int(ambiguous.sum()),
        unanswering=after_first - used,
        index=index,
    )


def measure_delays(
    stimulus: Waveform,
    response: Waveform,
    *,
    window_s: float,
    stimulus_edge: Edge = "rise",
    response_edge: Edge = "either",
    stimulus_threshold: float | None = None,
    response_threshold: float | None = None,
    same_direction: bool = False,
) -> Delays:
    """The delays of one acquisition's stimulus edges (the two waveforms share its time base).

    `same_direction` (an echo responder, both directions measured): rises are paired with rises
    and falls with falls, each direction with its own windows.
    """
    if stimulus.index != response.index:
        raise ValueError(f"waveforms of different acquisitions ({stimulus.index} and "
                         f"{response.index})")
    end = min(stimulus.t0_s + stimulus.dt_s * (len(stimulus) - 1),
              response.t0_s + response.dt_s * (len(response) - 1))
    if same_direction and stimulus_edge == "either" and response_edge == "either":
        parts = [measure_delays(stimulus, response, window_s=window_s, stimulus_edge=e,
                                response_edge=e,
                                stimulus_threshold=stimulus_threshold,
                                response_threshold=response_threshold)
                 for e in ("rise", "fall")]
        order = np.argsort(np.concatenate([p.stimulus_s for p in parts]), kind="stable")
        return Delays(
            stimulus_s=np.concatenate([p.stimulus_s for p in parts])[order],
            delay_s=np.concatenate([p.delay_s for p in parts])[order],
            censored=sum(p.censored for p in parts),
            ambiguous=sum(p.ambiguous for p in parts),
            unanswering=sum(p.unanswering for p in parts),
            index=stimulus.index,
        )
    s = edge_times(stimulus, stimulus_edge, stimulus_threshold)
    r = edge_times(response, response_edge, response_threshold)
    return pair_delays(s, r, window_s, end, stimulus.index)
