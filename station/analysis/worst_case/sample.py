"""The sample a worst case is estimated from: the whole array, or a TailSample that keeps only its
largest values with their positions (hour-long campaigns), behind one interface."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from station.analysis.distribution import Distribution
from station.analysis.worst_case.constants import TAIL_CAP


@dataclass(frozen=True, eq=False)
class TailSample:
    """The top of a large sample, enough for the tail fit: the whole sample's distribution and its
    largest values with their positions (0-based, in event order). The kept values are every
    sample value ≥ ``edge`` (ties at the edge included), in any order."""

    distribution: Distribution  # of the WHOLE sample
    values: np.ndarray  # every sample value >= edge, any order
    positions: np.ndarray  # int64, their positions in the sample, same order as values

    def __post_init__(self) -> None:
        values = np.asarray(self.values).ravel()
        if values.dtype.kind in "ub":
            values = values.astype(np.int64)
        positions = np.asarray(self.positions).ravel()
        if positions.size and positions.dtype.kind not in "iu":
            raise ValueError(f"positions must be integers, got dtype {positions.dtype}")
        if values.shape != positions.shape:
            raise ValueError(f"{values.size} values but {positions.size} positions")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "positions", positions.astype(np.int64, copy=False))

    @staticmethod
    def edge_for(distribution: Distribution, cap: int = TAIL_CAP) -> float:
        """The smallest value to keep: the cap-th largest of the sample, or the next distinct value
        up when ties there would make more than 2·cap values (inf for an empty sample). Only the
        top `cap` distinct values can hold it, so this costs O(cap) on any distribution."""
        if cap < 1:
            raise ValueError(f"cap must be at least 1, got {cap}")
        if not distribution.count:
            return math.inf
        # samples ≥ each value, from the top down
        at_least = np.cumsum(distribution.counts[-cap:][::-1])
        j = min(int(np.searchsorted(at_least, cap, side="left")), at_least.size - 1)
        if at_least[j] > 2 * cap and j > 0:
            j -= 1
        return float(distribution.values[-1 - j])

    @classmethod
    def of(cls, samples: np.ndarray, cap: int = TAIL_CAP) -> TailSample:
        """The tail sample of a 1-D array (integers or floats)."""
        a = np.asarray(samples).ravel()
        if a.dtype.kind in "ub":
            a = a.astype(np.int64)
        distribution = Distribution.of(a)
        positions = np.flatnonzero(a >= cls.edge_for(distribution, cap))
        return cls(distribution, a[positions], positions)

    @classmethod
    def pooled(cls, parts: Sequence[TailSample], lengths: Sequence[int],
               cap: int = TAIL_CAP) -> TailSample:
        """Samples put one after another (run order): positions of part i shifted by the sum of the
        earlier parts' lengths; the kept top is cut back to the pooled sample's own cap edge."""
        parts, lengths = list(parts), [int(v) for v in lengths]
        if len(parts) != len(lengths):
            raise ValueError(f"{len(parts)} parts but {len(lengths)} lengths")
        for i, (part, length) in enumerate(zip(parts, lengths, strict=True)):
            if part.distribution.count != length:
                raise ValueError(f"part {i}: length {length} but its distribution counts "
                                 f"{part.distribution.count}")
        distribution = Distribution.pooled([p.distribution for p in parts])
        if not parts:
            return cls(distribution, np.empty(0, np.int64), np.empty(0, np.int64))
        offsets = np.cumsum([0, *lengths[:-1]], dtype=np.int64)
        values = np.concatenate([p.values for p in parts])
        positions = np.concatenate([p.positions + off for p, off in zip(parts, offsets,
                                                                        strict=True)])
        # Each part holds all of its values ≥ its own edge, so the pooled top is complete only above
        # every value a part left out (that binds only when a part moved its edge over ties the pool
        # spreads out).
        edge = cls.edge_for(distribution, cap)
        left_out = max(p._largest_left_out() for p in parts)
        if edge <= left_out:
            at = int(np.searchsorted(distribution.values, left_out, side="right"))
            edge = float(distribution.values[at]) if at < distribution.values.size else math.inf
        keep = values >= edge
        return cls(distribution, values[keep], positions[keep])

    @property
    def edge(self) -> float:
        """The smallest kept value (inf when none is kept): every sample value ≥ it is kept."""
        return float(self.values.min()) if self.values.size else math.inf

    def _largest_left_out(self) -> float:
        """The largest sample value not kept (-inf when all are)."""
        at = int(np.searchsorted(self.distribution.values, self.edge, side="left"))
        return float(self.distribution.values[at - 1]) if at > 0 else -math.inf

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k largest values and their positions, largest first (ties in event order)."""
        if not 0 <= k <= self.values.size:
            raise ValueError(f"k = {k}, but {self.values.size} values are kept")
        order = np.lexsort((-self.positions, self.values))[::-1][:k]
        return self.values[order], self.positions[order]



# --------------------------------------------------------------------------- the whole sample


class _Sample(Protocol):
    """What the estimate asks of the whole sample (floats): ``Distribution``'s answers, and its
    top."""

    @property
    def count(self) -> int: ...
    @property
    def max(self) -> float: ...
    def count_above(self, threshold: float) -> int: ...
    def order_statistics(self, ranks: Sequence[int]) -> np.ndarray: ...

    def top(self, edge: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(values ≥ edge at hand, their positions ascending, the distinct values ≥ edge of the
        whole sample, how many values ≥ edge the whole sample has)."""
        ...


@dataclass(frozen=True)
class _ArrayInput:
    x: np.ndarray  # float64, finite

    @classmethod
    def of(cls, samples_ns: np.ndarray) -> _ArrayInput:
        x = np.asarray(samples_ns)
        if x.dtype == object or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
            raise ValueError(f"samples_ns must be numeric, got dtype {x.dtype}")
        x = x.astype(np.float64, copy=False).ravel()
        bad = ~np.isfinite(x)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"samples_ns contains {int(bad.sum())} NaN or infinite value(s) (first at index "
                f"{first}): remove lost or invalid events before estimating a worst case"
            )
        return cls(x)

    @property
    def count(self) -> int:
        return int(self.x.size)

    @property
    def max(self) -> float:
        return float(self.x.max())

    def count_above(self, threshold: float) -> int:
        return int(np.count_nonzero(self.x > threshold))

    def order_statistics(self, ranks: Sequence[int]) -> np.ndarray:
        at = np.asarray(ranks, dtype=np.int64) - 1
        return np.partition(self.x, np.unique(at))[at]

    def top(self, edge: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        idx = np.flatnonzero(self.x >= edge)
        raw = self.x[idx]
        return raw, idx, np.unique(raw), int(raw.size)


@dataclass(frozen=True)
class _TailInput:
    distribution: Distribution  # float64 values, finite
    values: np.ndarray  # float64, every sample value ≥ their minimum, in event order
    positions: np.ndarray  # int64, ascending

    @classmethod
    def of(cls, tail: TailSample) -> _TailInput:
        dist = _float_distribution(tail.distribution)
        values = tail.values.astype(np.float64)
        if not (np.isfinite(dist.values).all() and np.isfinite(values).all()):
            raise ValueError(
                "the tail sample contains NaN or infinite value(s): remove lost or invalid events "
                "before estimating a worst case"
            )
        # event order, as the array path sees its top
        order = np.argsort(tail.positions, kind="stable")
        values, positions = values[order], tail.positions[order]
        n = dist.count
        if positions.size and (
            positions[0] < 0 or positions[-1] >= n or (np.diff(positions) == 0).any()
        ):
            raise ValueError(f"tail sample positions must be distinct and within the sample's {n} "
                             "events")
        if values.size and _count_at_least(dist, float(values.min())) != values.size:
            # int64 values past 2**53 compared with a float edge: a rounded edge may hold only some
            # of the values that round to it; the kept values above it are still complete
            above = values > values.min()
            values, positions = values[above], positions[above]
            if values.size and _count_at_least(dist, float(values.min())) != values.size:
                raise ValueError(
                    "the tail sample's values are not every sample value above its edge: "
                    "collect all values >= TailSample.edge_for(distribution) with their positions"
                )
        return cls(dist, values, positions)

    @property
    def count(self) -> int:
        return self.distribution.count

    @property
    def max(self) -> float:
        return self.distribution.max

    def count_above(self, threshold: float) -> int:
        return self.distribution.count_above(threshold)

    def order_statistics(self, ranks: Sequence[int]) -> np.ndarray:
        return self.distribution.order_statistics(ranks)

    def top(self, edge: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        d = self.distribution
        at = int(np.searchsorted(d.values, edge, side="left"))
        keep = self.values >= edge
        return self.values[keep], self.positions[keep], d.values[at:], int(d.counts[at:].sum())


def _float_distribution(d: Distribution) -> Distribution:
    """The distribution of the sample as float64, as the array path sees it (integers past 2**53
    that round to the same float merge)."""
    if d.values.dtype == np.float64:
        return d
    f = d.values.astype(np.float64)
    if f.size < 2 or bool((f[1:] > f[:-1]).all()):
        return Distribution(f, d.counts)
    return Distribution.weighted(f, d.counts)


def _count_at_least(d: Distribution, value: float) -> int:
    return int(d.counts[np.searchsorted(d.values, value, side="left"):].sum())
