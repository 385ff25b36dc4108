"""One latency-module run analysed in batches: its report entry, the distributions its figures
draw, and the compact parts the campaign's comparisons need (tail, paired differences, the
paired events that can be outliers), in memory that does not grow with the run's length.

Three passes over the run's Parquet files, a batch (module_data.BATCH_ROWS rows) at a time:
1. t_SW (and the board's widths): distributions, exact;
2. scope widths: distribution (binned at streaming.WIDTH_QUANTUM_NS), moments and the
   cluster-robust standard error over acquisitions; the outlier thresholds and the tail's edge
   follow from these;
3. records and pulses together: the event pairing (pairing.StreamPairer) and the software tail
   (every value at or above the edge, with its position and board width).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from station.analysis import dependence
from station.analysis.distribution import Distribution
from station.analysis.samples import RunSamples
from station.analysis.streaming import (
    WIDTH_QUANTUM_NS,
    ClusterMoments,
    DistributionBuilder,
    Moments,
)
from station.analysis.worst_case import TailSample
from station.kinds.module import correlation, outliers
from station.kinds.module import data as module_data
from station.kinds.module.data import RunFiles
from station.kinds.module.false_pairs import (
    AGREE_NS,
    MAX_SPREAD_NS,
    BlockShare,
    max_share_within,
    pulses_needed,
)
from station.kinds.module.pairing import (
    HW_COLUMNS,
    METHOD,
    MIN_SEPARATION,
    EventNumbers,
    StreamPairer,
    pairs_frame,
    stray_mask,
)
from station.parsers import records
from station.store.manifest import Manifest
from station.store.run_store import read_csv_lines


@dataclass
class PairedDiffs:
    """A run's paired HW−SW differences, binned at WIDTH_QUANTUM_NS, and their bulk
    (correlation.bulk: within PAIRED_OUTLIER_MADS robust sigmas of the median)."""

    distribution: Distribution
    moments: Moments

    def __post_init__(self) -> None:
        d = self.distribution
        self.median = d.median()
        self.sigma = d.robust_sigma(self.median)
        # a bulk of one value (σ = 0) is that bin
        self.half_width = (
            correlation.PAIRED_OUTLIER_MADS * self.sigma if self.sigma > 0 else WIDTH_QUANTUM_NS / 2
        )

    def in_bulk(self, diff_ns: np.ndarray) -> np.ndarray:
        return np.abs(np.asarray(diff_ns, np.float64) - self.median) <= self.half_width

    def bulk_mean_se(self) -> tuple[float, float, int]:
        """(mean, standard error, events left out) of the differences in the bulk."""
        d = self.distribution
        lo = np.searchsorted(d.values, self.median - self.half_width, side="left")
        hi = np.searchsorted(d.values, self.median + self.half_width, side="right")
        inside = Distribution(d.values[lo:hi], d.counts[lo:hi])
        n = inside.count
        se = inside.std(1) / np.sqrt(n) if n > 1 else float("inf")
        return inside.mean(), float(se), d.count - n


@dataclass
class RunAnalysis:
    """What the campaign keeps of one run once its records are let go."""

    dir: Path
    manifest: Manifest
    entry: dict[str, Any]
    sw: Distribution
    hw: Distribution | None
    board: Distribution | None
    tail: TailSample  # the software sample's top (worst case, cross-interface)
    tail_board_ns: np.ndarray  # the board's width of each tail event, NaN where it has none
    diffs: PairedDiffs | None
    # paired events with t_SW ≥ candidate_floor_ns or t_HW above its threshold
    candidates: pd.DataFrame | None
    candidate_floor_ns: float
    blocks: dependence.FineBlocks | None = None  # t_SW in time order, block by block (dependence)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    def live_line(self) -> str:
        """The run's figures in a line, for the live view (campaign/live_analysis.py)."""
        if not self.sw.count:
            return "no t_SW records"
        median, p99 = self.sw.percentiles([50, 99])
        line = (f"t_SW median {median / 1e3:.2f} µs, p99 {p99 / 1e3:.2f} µs, max "
                f"{self.sw.max / 1e3:.2f} µs over {self.sw.count:,} events")
        if self.diffs is not None:
            line += (f"; t_HW − t_SW median {round(self.diffs.median):d} ns over "
                     f"{self.diffs.distribution.count:,} paired events")
        return line

    @property
    def samples(self) -> RunSamples:
        return RunSamples(sw_ns=self.sw, hw_ns=self.hw,
                          over_time=self.blocks.over_time() if self.blocks is not None else None)


def analyse_run(run_dir: Path) -> RunAnalysis:
    files = RunFiles(run_dir)  # the run's files, opened once for the passes below
    manifest = files.manifest
    sw_cols = files.columns("sw")
    truth_path = run_dir / "twin-truth.parquet"
    # pass 1: t_SW of the module's own records (a stray IRQ's record is no latency: counted apart)
    sw_b, strays, blocks = DistributionBuilder(), _StrayTally(), BlockShare()
    held = off_cpu = 0
    parted = "part" in sw_cols  # the module's numbers restarted: the seal numbered the parts on
    part_sizes: dict[int, int] = {}
    part_column = ("part",) if parted else ()
    for batch in files.iter_table("sw", ("latency_ns", "flags", "seq", "t_write_ns", *part_column)):
        own = strays.own(batch)
        if parted:
            for k, n in zip(*np.unique(batch["part"], return_counts=True), strict=True):
                part_sizes[int(k)] = part_sizes.get(int(k), 0) + int(n)
        if "flags" in batch:
            held += int(np.count_nonzero(batch["flags"] & int(records.Flag.HELD)))
            off_cpu += int(np.count_nonzero(batch["flags"][own] & int(records.Flag.OFF_CPU)))
        everything = own.all()  # the usual batch: no stray, no masked copies
        latency = batch["latency_ns"] if everything else batch["latency_ns"][own]
        sw_b.add(latency)
        if "seq" in batch:  # by seq: events but for the strays
            blocks.add(batch["seq"] if everything else batch["seq"][own], latency)
    sw = sw_b.result()
    if not sw.count:
        sw = Distribution(np.empty(0, np.int64), np.empty(0, np.int64))
    # pass 2: the scope's widths
    hw_b, cluster = DistributionBuilder(WIDTH_QUANTUM_NS), ClusterMoments()
    for batch in files.iter_table("hw", ("acquisition", "width_s")):
        widths = batch["width_s"].astype(np.float64, copy=False) * 1e9
        hw_b.add(widths)
        cluster.add(batch["acquisition"], widths)
    hw = hw_b.result() if cluster.values.count else None
    sw_thr, hw_thr = outliers.verdict_thresholds(sw, hw)
    edge = TailSample.edge_for(sw) if sw.count else np.inf
    floor = min(edge, sw_thr)
    # pass 3: pairing, the tail, the board's widths, the sequence numbers the twin's truth is joined
    # on
    present = _SeqSet() if truth_path.exists() and "seq" in sw_cols else None
    described = (sw.describe() or {}).get("percentiles_ns") or {}
    tail = _TailCollector(
        edge, present, tuple(described.get(k, np.nan) for k in dependence.PERCENTILES)
    )
    numbers = EventNumbers(strays.seqs())
    sw_stream = tail.tap(strays.only_own(files.iter_table("sw", ("seq", "latency_ns", "flags",
                                                                 "hw_width_ns",
                                                                    "t_write_ns", *part_column))))
    # the records the scope's window spans (events_first..last of the capture): the shift's software
    # side
    span = _SpanMoments.of(manifest.section("capture"), numbers)
    if span is not None:
        sw_stream = span.tap(sw_stream)
    # pairing never joins records across a restart: only the longest part is paired
    main_part = max(part_sizes, key=lambda k: (part_sizes[k], -k)) if part_sizes else None
    share = blocks.result(max_share_within(sw.values, sw.counts, 2 * AGREE_NS)) if sw.count else 1.0
    pairer = _pairer(files, sw_cols, numbers, share)
    diffs = candidates = None
    ppm = Moments()  # the scope's timebase against the target's clock, per pair
    # pairs whose acquisition's ratio could not be fitted (taken as 1)
    unmeasured, unmeasured_widest = 0, 0.0
    if pairer is not None:
        diff_b, diff_m, kept = DistributionBuilder(WIDTH_QUANTUM_NS), Moments(), []
        # pairing's temporaries are a few hundred bytes per pulse: a quarter of a batch at a time
        hw_stream = files.iter_table("hw", HW_COLUMNS, rows=module_data.BATCH_ROWS // 4)
        if not cluster.ordered:  # acquisitions out of order (never written so): sorted, in memory
            hw_stream = iter([_sorted_by_acquisition(list(hw_stream))])
        sw_events = (_event_batch(numbers, b, main_part) for b in sw_stream)
        for pairs in pairer.pairs(sw_events, hw_stream):
            diff = pairs["diff_ns"].to_numpy()
            diff_b.add(diff)
            diff_m.add(diff)
            measured = pairs["clock_ratio"].to_numpy() != 1.0  # 1: not measured in that acquisition
            ppm.add((pairs["clock_ratio"].to_numpy()[measured] - 1.0) * 1e6)
            if not measured.all():
                unmeasured += int((~measured).sum())
                unmeasured_widest = max(unmeasured_widest,
                                        float(pairs["hw_ns"].to_numpy()[~measured].max()))
            keep = (pairs["sw_ns"].to_numpy() >= floor) | (pairs["hw_ns"].to_numpy() > hw_thr)
            if keep.any():
                kept.append(pairs[keep])
        if diff_m.count:
            diffs = PairedDiffs(diff_b.result(), diff_m)
            candidates = pd.concat(kept, ignore_index=True) if kept else pairs_frame()
    for _ in sw_stream:  # the tail of records the pairing did not need
        pass
    values, positions, board_ns = tail.result()
    blocks = tail.blocks.close()
    board = tail.board.result() if tail.board_seen else None
    if present is not None:
        present.add(strays.seqs())  # the truth is joined on every record the run holds, strays too
    unmatched = pairer is not None and pairer.pulses and _unmatched(pairer)
    if unmatched:  # what paired here is chance: nothing is kept of it
        diffs = candidates = None
        ppm = Moments()
    dep = dependence_summary(sw, blocks, manifest.extra("period_ns")) if sw.count else None
    entry = _entry(files, sw, hw, board, cluster, diffs, pairer, present,
                   span.moments if span is not None and span.moments.count >= 2 else None)
    entry["dependence"] = dep
    entry["strays"] = strays.summary(manifest.extra("format", "v1"), "flags" in sw_cols)
    entry["test_held"] = held or None
    if main_part is not None and entry["losses"] is not None:
        entry["losses"]["paired_part"] = {"part": main_part, "records": part_sizes[main_part],
                                          "parts": len(part_sizes)}
    entry["off_cpu"] = off_cpu or None
    if entry.get("pairing") is not None:
        entry["pairing"]["scope_vs_target_ppm"] = ppm.mean if ppm.count else None
        # a width taken at ratio 1 is off by the clocks' real ratio: at most |ppm| × the widest such
        # pulse
        entry["pairing"]["clock_ratio_unmeasured"] = (
            {
                "pairs": unmeasured,
                "of": diffs.moments.count if diffs is not None else 0,
                "max_error_ns": abs(ppm.mean) * 1e-6 * unmeasured_widest
                if unmeasured and ppm.count
                else None,
            }
            if unmeasured
            else None
        )
    if diffs is not None and candidates is not None:
        entry["outlier_verdict"] = outliers.outlier_verdict_of_candidates(
            sw, hw, candidates, diffs.median, diffs.in_bulk(candidates["diff_ns"].to_numpy()),
            diffs.moments.count)
    elif sw.count:
        entry["outlier_verdict"] = outliers.outlier_verdict(sw, hw, None)
    else:
        entry["outlier_verdict"] = None
    return RunAnalysis(run_dir, manifest, entry, sw, hw, board, TailSample(sw, values, positions),
                       board_ns,
                       diffs, candidates, floor, blocks)


def dependence_summary(
    sw: Distribution, blocks: dependence.FineBlocks, period_ns: Any
) -> dict[str, Any]:
    """The run's dependence between events and its dependence-aware intervals (report
    `dependence`)."""
    mean = dependence.mean_interval(blocks)
    if mean.get("se_ns"):
        mean["effective_n"] = min(float(sw.count), sw.std(1) ** 2 / mean["se_ns"] ** 2)
    percentiles = dependence.quantile_intervals(sw, blocks)
    period_s = float(period_ns) / 1e9 if isinstance(period_ns, int | float) and period_ns else None
    cycle = dependence.cycle_seconds(blocks, period_s)
    return {"independent": bool(mean.get("independent")), "cycle_s": cycle,
            "block_events": dependence.FINE_EVENTS,
            "mean": mean, "percentiles": percentiles,
            "sentence": dependence.summary_sentence(mean, percentiles, sw.count, cycle, period_s)}


def _pairer(files: RunFiles, sw_cols: set[str], numbers: EventNumbers,
            share: float) -> StreamPairer | None:
    """The run's event pairer, or None when it cannot be paired (pairing.pair_run's conditions)."""
    arrivals_path = files.dir / "sw_arrivals.csv"
    if "seq" not in sw_cols or not arrivals_path.exists():
        return None
    if "armed_host_s" not in files.columns("hw"):
        return None
    arrivals = read_csv_lines(arrivals_path)
    if not len(arrivals):
        return None
    return StreamPairer(arrivals, int(files.manifest.extra("period_ns") or 0) or 1, numbers=numbers,
                        share=share)


class _StrayTally:
    """The stray IRQs among a run's records (NOT_OURS: a foreign interrupt on the module's line, its
    latency measured from an unrelated write): how many, which sequence numbers, when."""

    SHOWN = 20  # the times the report lists

    def __init__(self) -> None:
        self.records = 0
        self.count = 0
        self._seqs: list[np.ndarray] = []
        self._times: list[np.ndarray] = []  # target ns of each stray's handler
        self.first_ns: int | None = None  # the first record's handler, the run's time zero
        self.last_ns: int | None = None

    def own(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """The mask of the module's own records in a batch, tallying its strays."""
        n = len(batch["latency_ns"])
        self.records += n
        stray = stray_mask(batch.get("flags"), n)
        any_stray = stray.any()
        if "t_write_ns" in batch and n:
            writes, latency = batch["t_write_ns"], batch["latency_ns"]
            if self.first_ns is None:
                self.first_ns = int(writes[0]) + int(latency[0])
            self.last_ns = int(writes[-1]) + int(latency[-1])
            if any_stray:
                self._times.append(writes[stray].astype(np.int64) + latency[stray].astype(np.int64))
        if any_stray:
            self.count += int(stray.sum())
            if "seq" in batch:
                self._seqs.append(batch["seq"][stray].astype(np.int64))
        return ~stray

    def only_own(self, batches: Iterator[dict[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
        """The batches with the strays left out (nothing tallied: pass 1 did that)."""
        if not self.count:  # pass 1 found none (the usual run): no flag need be read again
            yield from batches
            return
        for batch in batches:
            stray = stray_mask(batch.get("flags"), len(batch["latency_ns"]))
            yield {c: a[~stray] for c, a in batch.items()} if stray.any() else batch

    def seqs(self) -> np.ndarray:
        return np.concatenate(self._seqs) if self._seqs else np.empty(0, np.int64)

    def summary(self, fmt: str, has_flags: bool) -> dict[str, Any]:
        if not has_flags:
            return {"count": None, "share": None, "times_s": [],
                    "note": f"{fmt} records carry no flags: a stray IRQ on the module's line "
                            "cannot be told from the module's own (the modules drop the ones they "
                            "flag), so t_SW may hold some"}
        times = np.concatenate(self._times) if self._times else np.empty(0, np.int64)
        zero = self.first_ns or 0
        span = (self.last_ns - zero) / 1e9 if self.last_ns is not None else 0.0
        return {"count": self.count, "share": self.count / self.records if self.records else 0.0,
                "per_s": self.count / span if span > 0 else None,
                "first_s": (int(times[0]) - zero) / 1e9 if len(times) else None,
                "last_s": (int(times[-1]) - zero) / 1e9 if len(times) else None,
                "times_s": [(int(t) - zero) / 1e9 for t in times[:self.SHOWN]], "note": None}


class _TailCollector:
    """Passes the records through, keeping the software values at or above `edge` (with their
    positions in the run and board widths), the board's widths and the sequence numbers seen."""

    def __init__(self, edge: float, present: _SeqSet | None, levels: tuple[float,
                                                                           ...] = ()) -> None:
        self.edge = edge
        self.present = present
        self.blocks = dependence.FineBlocks(levels=levels)  # the run in time order: its dependence
        self.position = 0
        self.board = DistributionBuilder()
        self.board_seen = False
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def tap(self, batches: Iterator[dict[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
        for batch in batches:
            lat = batch["latency_ns"]
            has = None
            if "flags" in batch and "hw_width_ns" in batch:
                has = (batch["flags"] & int(records.Flag.HW_WIDTH)) != 0
                if has.any():
                    self.board_seen = True
                    self.board.add(batch["hw_width_ns"][has].astype(np.int64))
            at = np.flatnonzero(lat >= self.edge)
            if len(at):
                board = np.full(len(at), np.nan)
                if has is not None:
                    board[has[at]] = batch["hw_width_ns"][at][has[at]]
                self._parts.append((lat[at], at + self.position, board))
            if self.present is not None:
                self.present.add(batch["seq"])
            t = batch.get("t_write_ns")
            self.blocks.add(lat, None if t is None else t.astype(np.float64) / 1e9)
            self.position += len(lat)
            yield batch

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self._parts:
            return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
        return tuple(np.concatenate(p) for p in zip(*self._parts,
                                                    strict=True))  # type: ignore[return-value]

class _SeqSet:
    """The sequence numbers a run recorded, as a bitmap (the twin's truth is joined on them)."""

    def __init__(self) -> None:
        self.bits = np.zeros(0, bool)

    def add(self, seq: np.ndarray) -> None:
        if not len(seq):
            return
        top = int(seq.max()) + 1
        if top > len(self.bits):
            grown = np.zeros(max(top, 2 * len(self.bits)), bool)
            grown[:len(self.bits)] = self.bits
            self.bits = grown
        self.bits[seq.astype(np.int64)] = True

    def has(self, seq: np.ndarray) -> np.ndarray:
        seq = np.asarray(seq, np.int64)
        if not len(self.bits):  # no record at all
            return np.zeros(seq.shape, bool)
        inside = (seq >= 0) & (seq < len(self.bits))
        return inside & self.bits[np.where(inside, seq, 0)]


def _event_batch(numbers: EventNumbers, batch: dict[str, np.ndarray], part: int | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(event numbers, t_SW, t_write) of a batch of own records for the pairing: of one part only
    where the module's numbers restarted."""
    if part is not None and "part" in batch:
        keep = batch["part"] == part
        batch = {k: v[keep] for k, v in batch.items()}
    return numbers.to_event(batch["seq"]), batch["latency_ns"], batch.get("t_write_ns")


class _SpanMoments:
    """t_SW moments of the own records whose event numbers lie in the scope's capture window."""

    def __init__(self, first: int, last: int, numbers: EventNumbers) -> None:
        self.first, self.last, self.numbers = first, last, numbers
        self.moments = Moments()

    @classmethod
    def of(cls, capture: dict | None, numbers: EventNumbers) -> _SpanMoments | None:
        capture = capture or {}
        if capture.get("first_event") is None or capture.get("last_event") is None:
            # an import, a legacy stream: no arrivals to place the window in the records
            return None
        return cls(int(capture["first_event"]), int(capture["last_event"]), numbers)

    def tap(self, batches: Iterator[dict[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
        for batch in batches:
            if "seq" in batch:
                event = self.numbers.to_event(batch["seq"])
                inside = (event >= self.first) & (event <= self.last)
                self.moments.add(np.asarray(batch["latency_ns"], np.float64)[inside])
            yield batch


def _entry(files: RunFiles, sw: Distribution, hw: Distribution | None, board: Distribution | None,
           cluster: ClusterMoments, diffs: PairedDiffs | None, pairer: StreamPairer | None,
           present: _SeqSet | None, span: Moments | None = None) -> dict[str, Any]:
    m = files.manifest
    losses = m.section("losses")
    shift = None
    if hw is not None and sw.count >= 2 and hw.count >= 2:
        # The shift's truth is this run's own HW−SW difference: the scope's acquisitions spread over
        # its capture window, so the error is which events the scope caught. The software side is
        # the records of that same window (`span`, where the arrivals place it): records before the
        # first acquisition or after the last meet another part of a load's phases, an error the
        # acquisitions' spread does not hold (a seeded test saw the unpaired t_rw miss by 4.6 SE).
        # The cluster-robust SE over acquisitions covers which events were caught, on dependent
        # events too (tests/test_dependence.py).
        hw_mean, hw_se = _hw_mean_se(cluster, files)
        shift = correlation.shift_of(sw, hw_mean, hw_se, hw.median(), _acquisitions(files, cluster),
                                     span)
    return {
        "id": m.run_id,
        **(m.run.model_dump() if m.run else {}),
        "period_ns": m.extra("period_ns"),
        "status": m.status,
        "error": m.error,
        "duration_s": m.duration_s,
        "sw": sw.describe(),
        "hw": _describe_widths(hw, cluster.values) if hw is not None else None,
        "board": board.describe() if board is not None else None,
        # no record stream (a scope-only import): nothing was lost because nothing was counted
        "losses": {
            "sw_lost": int(losses.get("sw_lost", 0)),
            "sw_dropped_by_target": int(losses.get("sw_dropped_by_target", 0)),
            "gaps": int(losses.get("gaps", 0)),
            "format": m.extra("format", "v1"),
            "restarts": losses.get("restarts") or [],
        } if m.extra("losses") is not None else None,
        "interrupts": m.extra("interrupts"),
        "capture": m.extra("capture"),
        "scope_measurement": m.extra("scope_measurement"),
        "shift": shift,
        "outliers": outliers.run_outliers(sw, hw) if sw.count else None,
        "truth": _truth(files.dir, present) if present is not None else None,
        "pairing": _pairing_summary(pairer,
                                    diffs) if pairer is not None and pairer.pulses else None,
    }


def _acquisitions(files: RunFiles, cluster: ClusterMoments) -> int:
    """How many scope acquisitions the run's pulses come from."""
    if cluster.ordered:
        return cluster.seen
    ids = [np.unique(b["acquisition"]) for b in files.iter_table("hw", ("acquisition",))]
    return int(np.unique(np.concatenate(ids)).size) if ids else 0


def _hw_mean_se(cluster: ClusterMoments, files: RunFiles) -> tuple[float, float]:
    """The scope widths' mean and cluster-robust standard error (correlation.shift's)."""
    if cluster.ordered:
        return cluster.mean_se()
    hw = _sorted_by_acquisition(list(files.iter_table("hw", ("acquisition", "width_s"))))
    return correlation.cluster_mean_se(hw["width_s"].astype(np.float64) * 1e9, hw["acquisition"])


def _sorted_by_acquisition(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Batches put together, sorted by acquisition (stable): for pulses not written in order."""
    whole = {c: np.concatenate([b[c] for b in batches]) for c in batches[0]} if batches else {}
    order = np.argsort(whole["acquisition"], kind="stable") if whole else None
    return {c: a[order] for c, a in whole.items()}


def _describe_widths(hw: Distribution, moments: Moments) -> dict | None:
    """describe() of scope widths: count, extremes, mean and std exact to rounding (moments),
    percentiles from the binned distribution (within half a bin)."""
    described = hw.describe()
    if described is not None:
        described.update(min_ns=moments.min, max_ns=moments.max, mean_ns=moments.mean,
                         std_ns=moments.std(1))
    return described


# fewer acquisitions paired than this: no paired estimate (its interval leans on few scope records)
MIN_PAIRED_ACQUISITIONS = 5
# the scope's pulses match the target's events in at most this share of the acquisitions that could
# be paired: the scope is watching something else (another target, another pin, a stale setting)
UNMATCHED_SHARE = 0.01


def _unmatched(pairer: StreamPairer) -> bool:
    """The scope's pulses match the target's events in at most UNMATCHED_SHARE of the acquisitions
    that could be paired (three at least): no alignment of theirs even fits (MAX_SPREAD_NS, beyond
    chance: the false-pair bound), as when the scope watches another signal. Acquisitions that fit
    several alignments alike (a record too coarse, on the seed's GPIB scope, to tell neighbouring
    events apart) are unpaired, not unmatched."""
    return pairer.pairable >= 3 and pairer.fitting <= UNMATCHED_SHARE * pairer.pairable


def _pairing_summary(pairer: StreamPairer, diffs: PairedDiffs | None) -> dict:
    m = diffs.moments if diffs is not None else Moments()
    paired = pairer.acquisitions_paired
    pulses_each = pairer.pulses / pairer.acquisitions if pairer.acquisitions else 0.0
    needed = pulses_needed(pairer.share_used, 2 * pairer.window + 1)
    unmatched = _unmatched(pairer)
    note = None
    if unmatched:
        note = (f"the scope's pulses match none of the target's events: {paired} of "
                f"{pairer.pairable} acquisitions that could be paired were (is the scope on this "
                "target's pin, this channel, this run?); no paired estimate")
    elif paired < MIN_PAIRED_ACQUISITIONS:
        alike = pairer.fitting - paired
        why = (f"acquisitions of {pulses_each:.3g} pulses on average; telling events apart needs "
               f"about {needed} agreeing pulses an acquisition with this run's t_SW "
               "spread" if needed else
               "this run's t_SW are too alike to tell events apart by their pulses")
        # enough pulses: the alignments were too alike
        if alike > 0 and needed and pulses_each >= needed:
            why = (f"{alike} of {pairer.pairable} acquisitions fit more than one alignment alike "
                   f"(the best within {MAX_SPREAD_NS:g} ns, the next not {MIN_SEPARATION:g}× "
                   "worse): the pulse widths are too coarse (the scope's sample interval) for "
                   "this run's t_SW spread to tell neighbouring events apart")
        note = (
            f"{paired} acquisitions paired (fewer than {MIN_PAIRED_ACQUISITIONS}): no paired "
            f"estimate; {why}"
        )
    return {
        "acquisitions": pairer.acquisitions,
        "acquisitions_paired": paired,
        "pulses": pairer.pulses,
        "pulses_paired": m.count,
        "coverage": m.count / pairer.pulses if pairer.pulses else None,
        "pairable": pairer.pairable,
        "pulses_needed": needed,
        "expected_false_pairs": pairer.expected_false_pairs,
        "false_pair_rate_bound": pairer.expected_false_pairs / paired if paired else None,
        "estimates": not unmatched and paired >= MIN_PAIRED_ACQUISITIONS,
        "unmatched": unmatched,
        "note": note,
        "hw_minus_sw_paired_mean_ns": m.mean if m.count else None,
        "hw_minus_sw_paired_median_ns": diffs.median if diffs is not None else None,
        "hw_minus_sw_paired_std_ns": m.std(1) if m.count > 1 else None,
        "method": METHOD,
    }


def _truth(run_dir: Path, present: _SeqSet) -> dict | None:
    """What the twin injected, for the events (and stray IRQs) this run recorded."""
    t_rw, hw_sw = Moments(), Moments()
    injected = strays = 0
    # see module_data.iter_table
    f = pq.ParquetFile(run_dir / "twin-truth.parquet", pre_buffer=False)
    columns = ["seq", "t_rw_ns", "hw_ns", "sw_ns",
               "d_sw_ns"] + (["stray"] if "stray" in f.schema_arrow.names else [])
    # one thread, as iter_table reads: Arrow's pool would leave threads that keep a report from
    # forking its figures' workers (station/analysis/run_pool.py)
    for batch in f.iter_batches(columns=columns, use_threads=False):
        t = batch.to_pandas(use_threads=False)
        t = t[present.has(t["seq"].to_numpy())]
        if "stray" in t:
            strays += int(t["stray"].sum())
            t = t[~t["stray"]]
        t = t.dropna()
        t_rw.add(t["t_rw_ns"].to_numpy(np.float64))
        hw_sw.add((t["hw_ns"] - t["sw_ns"]).to_numpy(np.float64))
        injected += int((t["d_sw_ns"] > 0).sum())
    if not t_rw.count:
        return None
    return {"t_rw_mean_ns": t_rw.mean, "hw_minus_sw_mean_ns": hw_sw.mean,
            "sw_outliers_injected": injected,
            "strays_injected": strays}
