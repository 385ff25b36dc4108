"""The kernel's guard against real-time starvation, named where it stopped the detector's loop: RT
throttling (the sched_rt_runtime_us budget ran out; the gap ends on the sched_rt_period_us grid,
where the budget is given back) or, from Linux 6.12, the fair deadline server (a starved CFS task
run for its runtime of each period). Gaps judged preempted or unexplained are re-attributed when
they form such a family."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from station.kinds.interruptions.attribution import Attributed
from station.target import rt_bandwidth, virtualization
from station.target.rt_bandwidth import Guard

THROTTLE_SOURCE = {"rt-throttling": "RT throttling", "fair-server": "fair server"}
# RT throttling: a throttled gap ends where the period timer fires and gives the budget back, late
# by the timer's own latency; it lasts at most the period's unbudgeted rest plus that lateness.
# Tolerance: this share of the rest (at least THROTTLE_GRID_MIN_NS); on a virtual machine, whose
# vCPU the host deschedules, the guest share (7 ms late seen on a loaded KVM guest, 10.2 ms on a
# QEMU/TCG guest: 1 stop in 8 runs of 5 s); two such gaps on one grid make the family
THROTTLE_GRID_SHARE = 0.2
THROTTLE_GRID_SHARE_GUEST = 0.4
THROTTLE_GRID_MIN_NS = 1_000_000
THROTTLE_MIN = 2
THROTTLE_MIN_SHARE = 0.5  # a throttled gap is at least this share of the rest
THROTTLE_SHORTENED_SHARE = 0.2  # … or this, when earlier stops in its period took the rest of it
THROTTLE_COVERAGE = 0.5  # of the run's whole periods (but the first) the family must cover


@dataclass(frozen=True)
class Throttling:
    """What stops the detector's never-sleeping SCHED_FIFO loop once a period: the kernel's guard
    (RT throttling, or the fair deadline server from 6.12: station/target/rt_bandwidth.py), with
    the analysis's tolerances."""

    guard: Guard
    cpu: int | None = None
    guest: bool = False  # the target is a virtual machine: its timers fire later

    @classmethod
    def rt(cls, runtime_us: int, period_us: int) -> Throttling:
        """RT throttling with sched_rt_runtime_us of sched_rt_period_us."""
        return cls(Guard("rt-throttling", (period_us - runtime_us) * 1000, period_us * 1000))

    @property
    def mechanism(self) -> str:
        return self.guard.mechanism

    @property
    def rest_ns(self) -> int:
        return self.guard.stop_ns

    @property
    def period_ns(self) -> int:
        return self.guard.period_ns

    @property
    def shortest_ns(self) -> float:
        """The shortest a throttled stop can be: the rest, less what higher-priority work took of it
        (the grid tolerance is about where it ends, not how long it is: a rest under 1 ms is a
        rest)."""
        return THROTTLE_MIN_SHARE * self.rest_ns

    @property
    def grid_ns(self) -> float:
        """How far from the period grid a throttled stop may end (the timer's lateness)."""
        share = THROTTLE_GRID_SHARE_GUEST if self.guest else THROTTLE_GRID_SHARE
        return max(share * self.rest_ns, THROTTLE_GRID_MIN_NS)

    @classmethod
    def from_facts(cls, facts: dict[str, str], cpu: int | None = None) -> Throttling | None:
        """From a run's spoiler facts: the harshest guard the kernel has; None when none stops the
        loop (throttling off, a fair server with runtime 0) or nothing is known."""
        found = rt_bandwidth.guards(facts)
        return cls(found[0], cpu, virtualization.judge(facts).virtual is True) if found else None

    def sentence(self) -> str:
        return self.guard.sentence(self.cpu)

    def advice(self) -> str:
        return self.guard.advice(self.cpu)


def mark_throttled(gaps: list[Attributed], throttling: Throttling | None, priority: int | None,
                   span_ns: int | None = None, blind: list[tuple[int, int]] | None = None) -> int:
    """Re-attribute to the kernel's throttling the gaps it explains, in place; returns how many.
    Only for a real-time loop (priority > 0) with throttling on: gaps not taken by interrupts or
    counted SMIs, no longer than the stop the mechanism allows, one a period: on one grid of the
    period for RT throttling (its period timer gives the budget back there; the phase is the ends'
    own, as the timer starts when the first RT task runs), a chain a period apart for the fair
    server (see `_family`). `blind`: the detector's blind spans, (end, length); a stop that fell in
    one counts towards the coverage."""
    if throttling is None or not priority or priority <= 0 or throttling.rest_ns <= 0:
        return 0
    period = throttling.period_ns
    longest = throttling.rest_ns + throttling.grid_ns
    shortest = throttling.shortest_ns
    candidates = sorted((g for g in gaps if g.cause in ("preempted", "unexplained")
                         and shortest <= g.duration_ns <= longest), key=lambda g: g.end_ns)
    if not candidates:
        return 0
    best = _family(candidates, throttling)
    # a loop that never sleeps is stopped every period: the family (and the stops that fell in the
    # detector's bookkeeping) must cover most of the run's whole periods, which two host stalls that
    # happen to end a whole period apart do not
    if span_ns is None:  # how long the loop ran is unknown: a family cannot be shown to cover it
        return 0
    periods = span_ns / period - 1
    in_blind = _blind_stops([g.end_ns for g in best], blind or [], throttling)
    if len(best) + in_blind < max(THROTTLE_MIN, THROTTLE_COVERAGE * periods):
        return 0
    # a period in which something else stopped the loop first leaves it budget to spare: its
    # throttle comes later and is shorter by as much (the rest, less what the others took), so a gap
    # on the family's grid below `shortest` is that period's throttle when the period's earlier
    # stops make up the difference (not a short gap: THROTTLE_SHORTENED_SHARE of the rest at least)
    family = {id(g) for g in best}
    ends = [g.end_ns for g in best]
    for g in gaps:
        if (id(g) in family or g.cause not in ("preempted", "unexplained")
                or not THROTTLE_SHORTENED_SHARE * throttling.rest_ns <= g.duration_ns < shortest
                or not _fits(g.end_ns, ends, throttling)):
            continue
        earlier = sum(o.duration_ns for o in gaps
                      if o is not g and g.end_ns - period < o.start_ns and o.end_ns <= g.start_ns)
        if g.duration_ns + earlier >= shortest:
            best.append(g)
    for g in best:
        g.cause, g.source = "throttled", THROTTLE_SOURCE[throttling.mechanism]
    return len(best)


def _family(candidates: list[Attributed], throttling: Throttling) -> list[Attributed]:
    """The largest set of candidates (sorted by end) one a period. RT throttling: ends on one grid
    of the period (the timer is exact). The fair server: a chain whose ends are a whole number of
    periods apart, give or take the tolerance per period: the server's runtime is charged at
    ticks, so a stop overruns by up to a tick, and its next period starts at its replenishment
    (Linux 6.18, HZ=250: 51-54 ms stops, 1004-1008 ms apart); a fixed grid would lose them."""
    period, grid = throttling.period_ns, throttling.grid_ns
    if throttling.mechanism != "fair-server":
        phases = np.asarray([g.end_ns % period for g in candidates], dtype=np.float64)
        best: list[Attributed] = []
        for ref in phases:  # the grid through each candidate's end: the one most ends fall on
            off = (phases - ref + period / 2) % period - period / 2
            members = [g for g, o in zip(candidates, off, strict=True) if abs(o) <= grid]
            if len(members) > len(best):
                best = members
        return best
    length, before = [1] * len(candidates), [-1] * len(candidates)
    for i, g in enumerate(candidates):  # the longest chain ending at each candidate
        for j in range(i):
            if length[j] + 1 > length[i] and _fits(g.end_ns, [candidates[j].end_ns], throttling):
                length[i], before[i] = length[j] + 1, j
    i = max(range(len(candidates)), key=length.__getitem__)
    chain = []
    while i >= 0:
        chain.append(candidates[i])
        i = before[i]
    return chain[::-1]


def _fits(end_ns: int, ends: list[int], throttling: Throttling) -> bool:
    """Whether `end_ns` lies a whole number of periods (≥ 1) from one of `ends`, within the grid
    tolerance (per period passed, for the fair server's drifting periods)."""
    period, grid = throttling.period_ns, throttling.grid_ns
    for other in ends:
        apart = abs(end_ns - other)
        k = round(apart / period)
        tolerance = grid * k if throttling.mechanism == "fair-server" else grid
        if k >= 1 and abs(apart - k * period) <= tolerance:
            return True
    return False


def _blind_stops(ends: list[int], blind: list[tuple[int, int]], throttling: Throttling) -> int:
    """How many blind spans ((end, length)) are as long as a stop and end a whole number of
    periods from one of `ends`."""
    longest = throttling.rest_ns + throttling.grid_ns
    return sum(1 for end, length in blind
               if throttling.shortest_ns <= length <= longest and _fits(end, ends, throttling))


def throttled_blind_spans(gaps: list[Attributed], blind: list[tuple[int, int]],
                          throttling: Throttling | None) -> int:
    """How many of the detector's blind spans (bookkeeping the CPU was taken from: (end, length))
    are the kernel's throttling stops: as long as one, ending where the throttled gaps' family
    would end. A stop that falls while the detector writes its records is seen only as such a
    span."""
    ends = [g.end_ns for g in gaps if g.cause == "throttled"]
    if throttling is None or not ends:
        return 0
    return _blind_stops(ends, blind, throttling)


