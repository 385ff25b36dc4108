"""Do the stop rules' intervals hold when a campaign looks after every round and stops when they
answer (issue 50), on latency with the twin's time structure, and how soon do they stop?

Seeded campaigns of the twin's event model (ModuleSession under load, as the twin streams it:
load phases, carry-over, a run offset per module load, drift; `--independent` for the preset
without them), each round one run per condition of `--events` records at 100 µs:

    A   the seed-2015 preset's LPT
    B   the same with its mean raised by `--delta` ns (a small real difference)

and the station's own rule code (station/campaign/stopping.py start/feed, the
QuantileSequence of station/analysis/anytime/) judging after every round:

* compare:        the order of A and B at the median run's `--at` percentile
* interval_width: A's median-run `--at` percentile known to within `--width` ns
* deadline:       whether A's median run misses a deadline `--deadline-gap` ns above the truth
                  more often than 1 − `--at` (the right answer: it meets it)
* exceedance:     an upper bound on A's median-run `--at` percentile (exceedance 1 − `--at`)

Truth: the same median from a separate reference of `--reference` independent runs (pairs) of
the model (other keys), its own standard error printed beside it. Each campaign is fed to its
cap whatever it decides, so the time-uniform error is measured: the share of campaigns whose
interval ever misses the truth, against 1 − confidence (target: at most that, plus three Monte
Carlo standard errors: OK / MISS). Beside it, in the same campaigns: a fixed-sample interval (the
exact order-statistic interval for a median) looked at after every round — what optional
stopping does to an ordinary interval.

Speed: the median round the rule stops at, against the fixed-sample design that settles the same
question in at least 80 % of the campaigns (the smallest n it needs, chosen in advance); target
≤ 50 % of it (OK / MISS). With `--planned-delta`, also against the design a user plans without
knowing the effect: sized (80 %) for the smallest difference worth detecting and met with the
larger one the campaigns have (compare); with `--planned-gap`, the deadline rule's likewise: the
fixed design sized to settle a deadline that much above the truth, met with `--deadline-gap`;
with `--planned-spread F`, interval_width's: the fixed design sized to reach `--width` on runs F
times as spread about their median as the ones met (a user sizing it from a guess of the
run-to-run spread, or from a pilot whose runs a fair comparison would count too).

    .venv/bin/python benchmarks/bench_stopping_coverage.py [--campaigns 60] [--cap 80]
        [--events 20000] [--delta 500] [--at 99] [--width 400] [--independent]
        [--searches 50] [--search-gap 600] [--planned-delta 250] [--planned-gap 200]
        [--planned-spread 2]
        [--rules compare,...]

and the worst-load search: three loads whose loaded latency the model shifts by 0, gap and
2·gap ns; the share of seeded searches that name the worst alone within the cap (target ≥ 95 %)
and the share that ever drop it (≤ 1 − confidence).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from station.campaign.stopping import feed, start  # noqa: E402
from station.config.until import StopRule  # noqa: E402
from station.twin.model import (  # noqa: E402
    CHUNK_EVENTS,
    InterfaceParams,
    ModuleSession,
    Preset,
    load_preset,
)

PERIOD_NS = 100_000
POWER = 0.8  # the fixed design is sized to settle the question in this share of campaigns
A, B = ("lpt", "inb", "loaded"), ("lpt-raised", "inb", "loaded")


def run_value(p: InterfaceParams, preset: Preset, events: int, material: str, at: float) -> float:
    """One run's percentile `at` of its t_SW, as its manifest's unit gives it."""
    s = ModuleSession(p, preset.calibration_samples, PERIOD_NS, False, 0, material, keep_truth=False,
                      phases=preset.load_phases, drift_seed=1)
    sw = np.concatenate([s.chunk(i, True).sw for i in range(events // CHUNK_EVENTS)])
    return float(np.percentile(sw, 100 * at))


def fixed_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The exact (sign-test) interval for a median from n values: order statistics k and n+1−k
    with P(Bin(n, ½) < k) ≤ (1 − confidence)/2; unbounded while n is too small."""
    n = len(values)
    k = int(stats.binom.ppf((1 - confidence) / 2, n, 0.5))  # P(Bin ≤ k−1) ≤ α/2 for this k
    while k > 0 and stats.binom.cdf(k - 1, n, 0.5) > (1 - confidence) / 2:
        k -= 1
    if k < 1:
        return -math.inf, math.inf
    s = np.sort(values)
    return float(s[k - 1]), float(s[n - k])


def settled(rule: StopRule, lower: float, upper: float) -> bool:
    """Whether an interval settles the rule's question (for the fixed-sample interval)."""
    if rule.compare is not None:
        return lower > 0 or upper < 0
    if rule.deadline is not None:
        return upper <= rule.deadline * 1e9 or lower > rule.deadline * 1e9
    if rule.exceedance is not None:
        return math.isfinite(upper)
    return upper - lower <= rule.interval_width * 1e9


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaigns", type=int, default=60)
    ap.add_argument("--cap", type=int, default=80)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--delta", type=float, default=500.0, help="B's mean above A's (ns)")
    ap.add_argument("--at", type=float, default=99.0, help="the run percentile")
    ap.add_argument("--width", type=float, default=400.0, help="interval_width (ns)")
    ap.add_argument("--planned-delta", type=float, default=None,
                    help="also size the fixed compare design for this smaller difference (ns)")
    ap.add_argument("--planned-gap", type=float, default=None,
                    help="also size the fixed deadline design for a deadline this much (ns) above "
                         "the truth, nearer than --deadline-gap")
    ap.add_argument("--planned-spread", type=float, default=None,
                    help="also size the fixed interval_width design for runs this many times as "
                         "spread about their median as the ones met")
    ap.add_argument("--rules", default="compare,interval_width,deadline,exceedance",
                    help="the rules to study, comma-separated")
    ap.add_argument("--deadline-gap", type=float, default=400.0,
                    help="the deadline rule's deadline above the truth (ns)")
    ap.add_argument("--reference", type=int, default=1000)
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--independent", action="store_true")
    ap.add_argument("--searches", type=int, default=50)
    ap.add_argument("--search-two-sided", action="store_true",
                    help="the search as it ran before it spent its error one-sided: each load's "
                         "sequence two-sided at alpha/K (every interval then holds together at "
                         "the confidence), judged against the same alpha")
    ap.add_argument("--search-gap", type=float, default=600.0,
                    help="the loads' shifts step (ns): 0, gap, 2·gap")
    args = ap.parse_args(argv)

    preset = load_preset("seed-2015")
    if args.independent:
        preset = preset.independent()
    lpt = preset.interfaces["lpt"]
    params = {A[0]: lpt, B[0]: replace(lpt, sw_mean=lpt.sw_mean + args.delta)}
    at = args.at / 100
    print(f"twin model {'independent' if args.independent else 'with its time structure'}; "
          f"{args.campaigns} campaigns, cap {args.cap} rounds, {args.events} events a run, "
          f"p{args.at:g}, B = A + {args.delta:g} ns, confidence {args.confidence:g}")

    ref = {c: np.array([run_value(params[c], preset, args.events, f"ref-{c}-{k}", at)
                        for k in range(args.reference)]) for c in (A[0], B[0])}
    median_run = float(np.median(ref[A[0]]))
    # the deadline `--deadline-gap` above A's true median-run percentile: the answer is "meets"
    deadline_ns = median_run + args.deadline_gap
    rules = {
        "compare": (StopRule(compare="interfaces", at=f"p{args.at:g}", confidence=args.confidence),
                    [(f"{A[0]} − {B[0]}", A, B)]),
        "interval_width": (StopRule(interval_width=args.width * 1e-9, at=f"p{args.at:g}",
                                    confidence=args.confidence), [(A[0], A, A)]),
        "deadline": (StopRule(deadline=deadline_ns * 1e-9, miss_below=round(1 - at, 12),
                              confidence=args.confidence), [(A[0], A, A)]),
        "exceedance": (StopRule(exceedance=round(1 - at, 12), confidence=args.confidence),
                       [(A[0], A, A)]),
    }
    truths = {"compare": float(np.median(ref[A[0]] - ref[B[0]])), "interval_width": median_run,
              "deadline": median_run, "exceedance": median_run}
    print(f"  deadline rule: {deadline_ns:.0f} ns ({args.deadline_gap:g} ns above the truth: "
          "the right answer is 'meets'), miss_below {:g}".format(round(1 - at, 12)))
    for name, value in truths.items():
        spread = ref[A[0]] - ref[B[0]] if name == "compare" else ref[A[0]]
        se = 1.2533 * float(np.std(spread)) / math.sqrt(args.reference)
        print(f"  truth {name}: {value:.1f} ns (reference of {args.reference} runs; s.e. ≈ "
              f"{se:.1f} ns; run-to-run s.d. {float(np.std(spread)):.1f} ns)")

    failed = False
    stops_of: dict[str, list[int]] = {}
    alpha = 1 - args.confidence
    slack = 3 * math.sqrt(alpha * (1 - alpha) / args.campaigns)
    for name, (rule, pairs) in rules.items():
        if name not in args.rules.split(","):
            continue
        truth = truths[name]
        ever_missed = held_at_stop = fixed_ever_missed = wrong = 0
        stops: list[int] = []
        fixed_settled = np.zeros(args.cap + 1)
        for c in range(args.campaigns):
            judgement = start(rule, pairs)
            stopped, missed, fixed_missed = None, False, False
            values = {cell: [] for cell in {A, B}}
            for r in range(args.cap):
                row = {cell: run_value(params[cell[0]], preset, args.events, f"c{c}-{name}-r{r}-"
                                       f"{cell[0]}", at) for cell in {p for _, a, b in pairs
                                                                     for p in (a, b)}}
                feed(judgement, rule, pairs, r, row)
                lower, upper = judgement.groups[0].sequence.interval
                missed |= not lower <= truth <= upper
                if stopped is None and judgement.verdict == "answered":
                    stopped = r + 1
                    held_at_stop += lower <= truth <= upper
                    wrong += judgement.groups[0].state.startswith("misses")
                for cell, v in row.items():
                    values[cell].append(v)
                seq = (np.array(values[pairs[0][1]]) - (np.array(values[pairs[0][2]])
                                                        if pairs[0][1] != pairs[0][2] else 0.0))
                f_lo, f_hi = fixed_interval(seq, args.confidence)
                fixed_missed |= not f_lo <= truth <= f_hi
                fixed_settled[r + 1] += settled(rule, f_lo, f_hi)
            ever_missed += missed
            fixed_ever_missed += fixed_missed
            stops.append(stopped if stopped is not None else args.cap + 1)
        stops_of[name] = stops
        share = ever_missed / args.campaigns
        ok = share <= alpha + slack
        failed |= not ok
        answered = [s for s in stops if s <= args.cap]
        n_fixed = next((n for n in range(1, args.cap + 1)
                        if fixed_settled[n] >= POWER * args.campaigns), None)
        median_stop = float(np.median(stops))
        print(f"\n{name}: truth {truth:.1f} ns")
        print(f"  ever missed (time-uniform, every round to the cap): {share:.3f} "
              f"(stated ≤ {alpha:.3f}, +{slack:.3f} Monte Carlo) {'OK' if ok else 'MISS'}")
        print(f"  held at the round it stopped: {held_at_stop}/{len(answered)}"
              + (f"; said 'misses' (wrong) in {wrong}" if name == "deadline" else ""))
        print(f"  the fixed-sample interval looked at every round: ever missed "
              f"{fixed_ever_missed / args.campaigns:.3f} (what optional stopping does)")
        print(f"  answered in {len(answered)}/{args.campaigns} campaigns by the cap; median stop "
              f"round {median_stop:g}" + (" (cap+1: not answered)" if median_stop > args.cap
                                           else ""))
        if n_fixed is None:
            print(f"  fixed design: no n ≤ {args.cap} settles it in {POWER:.0%} of campaigns")
        else:
            ratio = median_stop / n_fixed
            print(f"  fixed design settling it in {POWER:.0%}: n = {n_fixed}; median stop / n = "
                  f"{ratio:.2f} (target ≤ 0.50) {'OK' if ratio <= 0.5 else 'MISS'}")
    if args.planned_delta is not None and "compare" in stops_of:
        failed |= planned_study(args, preset, params, at, float(np.median(stops_of["compare"])))
    if args.planned_gap is not None and "deadline" in stops_of:
        failed |= planned_deadline_study(args, preset, params, at, median_run,
                                         float(np.median(stops_of["deadline"])))
    if args.planned_spread is not None and "interval_width" in stops_of:
        failed |= planned_width_study(args, preset, params, at, median_run,
                                      float(np.median(stops_of["interval_width"])))
    failed |= search_study(args, preset, lpt, at)
    return 1 if failed else 0


def planned_study(args: argparse.Namespace, preset: Preset, params: dict[str, InterfaceParams],
                  at: float, median_stop: float) -> bool:
    """The speed target against the fixed design a user would plan without knowing the effect:
    sized (80 % power, the same confidence) for the smallest difference worth detecting,
    `--planned-delta` ns, and met with the larger one the campaigns had (`--delta`). The n comes
    from `--campaigns` seeded campaigns at the planned difference (other keys), fixed intervals
    alone."""
    rule = StopRule(compare="interfaces", at=f"p{args.at:g}", confidence=args.confidence)
    planned = replace(params[A[0]], sw_mean=params[A[0]].sw_mean + args.planned_delta)
    settled_at = np.zeros(args.cap + 1)
    for c in range(args.campaigns):
        diffs: list[float] = []
        for r in range(args.cap):
            diffs.append(run_value(params[A[0]], preset, args.events, f"p{c}-r{r}-a", at)
                         - run_value(planned, preset, args.events, f"p{c}-r{r}-b", at))
            settled_at[r + 1] += settled(rule, *fixed_interval(np.array(diffs), args.confidence))
    print(f"\ncompare against the fixed design planned for the smallest difference worth "
          f"detecting ({args.planned_delta:g} ns; the campaigns had {args.delta:g} ns):")
    return planned_verdict(args, settled_at, "difference", median_stop)


def planned_verdict(args: argparse.Namespace, settled_at: np.ndarray, what: str,
                    median_stop: float) -> bool:
    """The planned design's n (the fewest runs that settle the planned case in POWER of the
    campaigns) against the rule's median stop; whether the target is missed."""
    n_fixed = next((n for n in range(1, args.cap + 1) if settled_at[n] >= POWER * args.campaigns),
                   None)
    if n_fixed is None:
        print(f"  no n ≤ {args.cap} settles the planned {what} in {POWER:.0%} of campaigns: "
              f"the plan needs more than the cap; median stop {median_stop:g}")
        return False
    ratio = median_stop / n_fixed
    print(f"  planned n = {n_fixed}; the rule's median stop {median_stop:g}; median stop / n = "
          f"{ratio:.2f} (target ≤ 0.50) {'OK' if ratio <= 0.5 else 'MISS'}")
    return ratio > 0.5


def planned_deadline_study(args: argparse.Namespace, preset: Preset,
                           params: dict[str, InterfaceParams], at: float, median_run: float,
                           median_stop: float) -> bool:
    """The deadline rule's speed against the fixed design a user plans without knowing how far
    under the deadline the target is: sized (80 % power, the same confidence) to show "meets" for a
    deadline `--planned-gap` ns above the median run's percentile (the closest call worth
    settling), met with the deadline the campaigns had (`--deadline-gap` above it). The n comes
    from `--campaigns` seeded campaigns of A (other keys), fixed intervals alone."""
    planned_ns = median_run + args.planned_gap
    rule = StopRule(deadline=planned_ns * 1e-9, miss_below=round(1 - at, 12),
                    confidence=args.confidence)
    settled_at = np.zeros(args.cap + 1)
    for c in range(args.campaigns):
        values: list[float] = []
        for r in range(args.cap):
            values.append(run_value(params[A[0]], preset, args.events, f"d{c}-r{r}", at))
            f_lo, f_hi = fixed_interval(np.array(values), args.confidence)
            settled_at[r + 1] += settled(rule, f_lo, f_hi)
    print(f"\ndeadline against the fixed design planned for the closest deadline worth settling "
          f"({args.planned_gap:g} ns above the truth; the campaigns had {args.deadline_gap:g} ns):")
    return planned_verdict(args, settled_at, "deadline", median_stop)


def planned_width_study(args: argparse.Namespace, preset: Preset,
                        params: dict[str, InterfaceParams], at: float, median_run: float,
                        median_stop: float) -> bool:
    """interval_width's speed against the fixed design a user sizes without knowing the run-to-run
    spread: to reach `--width` (80 % power, the same confidence) on runs `--planned-spread` times as
    spread about their median as those met. The n comes from `--campaigns` seeded campaigns of A
    (other keys), each run's value moved away from the median run's by that factor, fixed
    intervals alone."""
    rule = StopRule(interval_width=args.width * 1e-9, at=f"p{args.at:g}",
                    confidence=args.confidence)
    settled_at = np.zeros(args.cap + 1)
    for c in range(args.campaigns):
        values: list[float] = []
        for r in range(args.cap):
            v = run_value(params[A[0]], preset, args.events, f"w{c}-r{r}", at)
            values.append(median_run + args.planned_spread * (v - median_run))
            settled_at[r + 1] += settled(rule, *fixed_interval(np.array(values), args.confidence))
    print(f"\ninterval_width against the fixed design planned for runs {args.planned_spread:g}× as "
          f"spread as met ({args.width:g} ns wide):")
    return planned_verdict(args, settled_at, "width", median_stop)


def search_study(args: argparse.Namespace, preset: Preset, lpt: InterfaceParams, at: float) -> bool:
    """The worst-load search (stopping.start_search/feed_search, as a campaign judges it) over
    three loads whose loaded latency the model shifts by 0, gap and 2·gap ns (the last the truth's
    worst), `--searches` seeded searches to the cap: the share that name the worst alone, and the
    share that ever drop it."""
    from station.campaign.stopping import feed_search, start_search
    from station.twin.model import with_load_effect

    if args.searches <= 0:
        return False

    gap = args.search_gap
    loads = {"light": 0.0, "medium": gap, "heavy": 2 * gap}
    params = {name: with_load_effect(lpt, shift_ns=shift) for name, shift in loads.items()}
    alpha = 1 - args.confidence
    # the station spends alpha/K a side (elimination.py); two-sided spending is the same code at
    # half the error: each load's sequence two-sided at alpha/K
    spent = 1 - alpha / 2 if args.search_two_sided else args.confidence
    rule = StopRule(worst="loads", at=f"p{args.at:g}", confidence=round(spent, 12))
    cell = ("lpt", "inb")
    found = wrong = 0
    rounds: list[int] = []
    for c in range(args.searches):
        judgement = start_search(rule, [cell], list(loads))
        search = judgement.searches[cell]
        r = 0
        while not search.done and r < args.cap:
            feed_search(judgement, cell, r, {
                name: run_value(params[name], preset, args.events, f"s{c}-r{r}-{name}", at)
                for name in search.survivors})
            r += 1
        found += search.survivors == ("heavy",)
        wrong += "heavy" in search.eliminated
        rounds.append(r if search.done else args.cap + 1)
    share, wrong_share = found / args.searches, wrong / args.searches
    slack = 3 * math.sqrt(alpha * (1 - alpha) / args.searches)
    print(f"\nworst-load search: loads shifted 0 / {gap:g} / {2 * gap:g} ns, {args.searches} "
          f"searches, cap {args.cap} rounds"
          + (f" (two-sided spending: the search run at confidence {spent:g})"
             if args.search_two_sided else ""))
    print(f"  named the worst alone within the cap: {share:.3f} (target ≥ 0.95) "
          f"{'OK' if share >= 0.95 else 'MISS'}")
    print(f"  ever dropped the worst: {wrong_share:.3f} (stated ≤ {alpha:.3f}, +{slack:.3f} Monte "
          f"Carlo) {'OK' if wrong_share <= alpha + slack else 'MISS'}")
    print(f"  median rounds: {float(np.median(rounds)):g} (cap+1: not done)")
    return wrong_share > alpha + slack or share < 0.95


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
