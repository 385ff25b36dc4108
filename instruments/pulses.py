"""Waveform -> edges -> pulses, vectorised.

Edges come from a Schmitt trigger (a threshold with hysteresis, so noise on a
slow edge counts once); each edge time is refined to sub-sample precision by
linear interpolation of the threshold crossing between the two samples around
it. A pulse is a leading edge followed by a trailing edge; pulses cut by the
start or the end of the record are dropped, as their width is unknown.

One definition, two implementations. On float64 volts (`auto_threshold`,
`find_edges`: any Waveform), and on the digitizer's integer codes, for a
Waveform that keeps them (what a scope transfers: 1 or 2 bytes a sample, up to
hundreds of millions of them). The code path never builds a full-size
temporary: one pass in cache-sized slices summarises each BLOCK of samples by
its lowest and highest code (and takes the histogram and noise samples); the
thresholds become code ranges; only the blocks where the Schmitt state can
change are read again, in batches, 8 samples at a time and then one by one
where the band changes; only the two samples around each edge are turned into
volts. Both paths evaluate the same volts with the same float operations, so
they give the same thresholds and the same edges, to the bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from instruments.scope import CodeScale, Frames, Waveform

HISTOGRAM_BINS = 256
# records longer than this: the level histogram is of an evenly strided sample of at most
# this many points (a level's mode needs no 100 million of them) ...
HISTOGRAM_SAMPLES = 1 << 18
# ... unless a half of the range gets fewer of them than this (a lone short pulse in a long
# record): then every sample is counted
HISTOGRAM_MIN_COUNT = 64
MIN_SWING_SIGMAS = 5.0  # levels closer than this many noise sigmas are one level
HYSTERESIS_SWING = 0.1  # default hysteresis as a share of the high-low swing
HYSTERESIS_SIGMAS = 4.0  # ... but at least this many noise sigmas
NOISE_SAMPLES = 16_384  # about this many samples (evenly strided) estimate the noise

# the code path: samples summarised by their lowest and highest code (np.minimum.reduceat's
# per-block cost fades above ~1000), read in slices that stay in cache for the several reads,
# candidate blocks examined this many at a time (a few MB of temporaries)
BLOCK = 1024
CHUNK = 4096 * BLOCK
BATCH_BLOCKS = 1024
WORD = 8  # in a candidate block, samples are tested 8 at a time (as one uint64) before one by one
CODE_PATH_ITEMSIZE = 2  # int8/uint8/int16/uint16 codes: a table holds the volts of every code

Polarity = Literal["high", "low"]
# a band of codes: the codes on one side of one, (np.greater_equal or np.less_equal, code); None: no
# code
Band = tuple[Callable[[np.ndarray, int], np.ndarray], int] | None


@dataclass(frozen=True, eq=False)
class Pulses:
    """Pulses of one acquisition; start times are relative to its trigger."""

    start_s: np.ndarray
    width_s: np.ndarray
    index: int = 0  # the acquisition (Waveform.index) they come from

    def __len__(self) -> int:
        return len(self.width_s)


@dataclass(frozen=True, eq=False)
class FramePulses(Pulses):
    """Pulses of a segmented acquisition: start times from frame 0's trigger (the frames' time
    tags placed each frame), and the frame each pulse lies in."""

    frame: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))


# --- the threshold --------------------------------------------------------------------------
def auto_threshold(volts: np.ndarray, resolution_v: float = 0.0) -> tuple[float, float] | None:
    """(threshold, hysteresis) from the record's own logic levels, None if it has one level.

    The low and high levels are the histogram modes of the lower and upper
    halves of the record's range (the usual scope "histogram" method, robust
    to overshoot and to duty cycle); the threshold is their midpoint. Levels
    fewer than MIN_SWING_SIGMAS noise sigmas (or digitizer steps,
    `resolution_v`) apart are taken as one. Above HISTOGRAM_SAMPLES points the
    histogram is of an evenly strided sample (see HISTOGRAM_MIN_COUNT).
    """
    v = np.asarray(volts, dtype=np.float64)
    if not len(v):
        return None
    lo, hi = float(v.min()), float(v.max())
    # levels closer than a histogram bin can be (subnormal)
    if not hi / HISTOGRAM_BINS - lo / HISTOGRAM_BINS > 0:
        return None
    if not np.isfinite(hi - lo):
        raise ValueError(f"record spans {lo:g} V to {hi:g} V: not a scope record")
    sample = v[:: _noise_step(len(v))]  # a spread estimate needs no 120 000 points
    return _levels(lo, hi, len(v), lambda step: _bin_counts(v[::step], lo, hi), sample,
                   resolution_v)


def waveform_threshold(waveform: Waveform) -> tuple[float, float] | None:
    """`auto_threshold` of a waveform, computed on its codes when it keeps them."""
    return _threshold(waveform, _CodeRecord.of(waveform))


def _threshold(waveform: Waveform, record: _CodeRecord | None) -> tuple[float, float] | None:
    """auto_threshold on the record's codes when it has them (`record`), else on its volts."""
    if record is None:
        return auto_threshold(waveform.volts, waveform.resolution_v)
    return record.auto_threshold(waveform.resolution_v)


def _noise_step(n: int) -> int:
    return max(1, n // NOISE_SAMPLES)


def _bin_counts(values: np.ndarray, lo: float, hi: float,
                weights: np.ndarray | None = None) -> np.ndarray:
    """The HISTOGRAM_BINS counts of `values` (each counted `weights` times) over lo..hi."""
    # histogram by bincount: several times faster than np.histogram on 120 000 points
    width = (hi - lo) / HISTOGRAM_BINS
    bins = np.minimum(((values - lo) / width).astype(np.int64), HISTOGRAM_BINS - 1)
    return np.bincount(bins, weights, minlength=HISTOGRAM_BINS)


def _levels(
    lo: float,
    hi: float,
    n: int,
    counts_every: Callable[[int], np.ndarray],
    noise: np.ndarray,
    resolution_v: float,
) -> tuple[float, float] | None:
    """auto_threshold's rules, given the range of the n samples, their histogram counts when
    taken every `step` (`counts_every(step)`) and the noise sample, in volts."""
    step = -(-n // HISTOGRAM_SAMPLES)
    counts = counts_every(step)
    half = HISTOGRAM_BINS // 2
    if step > 1 and min(counts[:half].sum(), counts[half:].sum()) < HISTOGRAM_MIN_COUNT:
        counts = counts_every(1)  # a level too rare for the sample: count it all
    width = (hi - lo) / HISTOGRAM_BINS
    centres = lo + width * (np.arange(HISTOGRAM_BINS) + 0.5)
    mid = 0.5 * (lo + hi)
    low = float(centres[np.argmax(counts[:half])])
    high = float(centres[half + np.argmax(counts[half:])])
    swing = high - low
    # noise: robust spread of each half around its level, but at least the digitizer's
    # step (a flat quantised record sits on one or two codes: zero spread, no signal)
    sigma = max(_mad(noise[noise < mid], low), _mad(noise[noise >= mid], high), resolution_v)
    if swing <= MIN_SWING_SIGMAS * sigma:
        return None  # noise around one level, not two logic levels
    hysteresis = min(max(HYSTERESIS_SWING * swing, HYSTERESIS_SIGMAS * sigma), 0.5 * swing)
    return 0.5 * (low + high), hysteresis


def _mad(v: np.ndarray, level: float) -> float:
    """Median absolute deviation from `level`, scaled to a Gaussian sigma."""
    return 1.4826 * float(np.median(np.abs(v - level))) if len(v) else 0.0


# --- edges ------------------------------------------------------------------------------------
def find_edges(volts: np.ndarray, threshold: float, hysteresis: float = 0.0) -> tuple[np.ndarray,
                                                                                      np.ndarray]:
    """Fractional sample positions of the rising and of the falling crossings.

    A sample is "high" above threshold + hysteresis/2 and "low" below
    threshold - hysteresis/2; an edge is a change between the two. Its
    position is where the straight line between the last sample on the old
    side of the threshold and the next one crosses the threshold. Rising and
    falling edges alternate.
    """
    v = np.asarray(volts, dtype=np.float64)
    empty = np.empty(0)
    if len(v) < 2:
        return empty, empty
    half = max(hysteresis, 0.0) / 2
    below, above = v < threshold, v > threshold
    # strictly on their side of the threshold even when threshold ± half rounds onto it
    up = (v >= threshold + half) & above
    down = (v <= threshold - half) & below
    # Schmitt transitions, touching only the few samples where a band is entered
    change = _transitions(_starts(up), _starts(down))
    if change is None:
        return empty, empty
    first_new, rising, _ = change
    # the crossing: between the last sample on the old side of the threshold and the
    # next, i.e. at the last raw crossing of the threshold in that direction
    raw_up = np.flatnonzero(below[:-1] & ~below[1:])
    raw_down = np.flatnonzero(above[:-1] & ~above[1:])
    k = np.empty(len(first_new), dtype=np.int64)
    k[rising] = raw_up[np.searchsorted(raw_up, first_new[rising]) - 1]
    k[~rising] = raw_down[np.searchsorted(raw_down, first_new[~rising]) - 1]
    position = k + (threshold - v[k]) / (v[k + 1] - v[k])
    return position[rising], position[~rising]


def _starts(mask: np.ndarray) -> np.ndarray:
    """Indices where a run of True begins (index 0 included)."""
    starts = np.flatnonzero(mask[1:] > mask[:-1]) + 1
    return np.concatenate([[0], starts]) if len(mask) and mask[0] else starts


def _transitions(enter_up: np.ndarray, enter_down: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                        np.ndarray] | None:
    """The Schmitt transitions among band entries: (first sample in the new band, rising?,
    the entry of the old band before it); None if there is none.

    Re-entering the band one is already in is no edge; the first entry sets the state.
    """
    at = np.concatenate([enter_up, enter_down])
    order = np.argsort(at, kind="stable")
    at = at[order]
    kind = np.concatenate([np.ones(len(enter_up), bool), np.zeros(len(enter_down), bool)])[order]
    change = np.flatnonzero(kind[1:] != kind[:-1]) + 1
    if not len(change):
        return None
    return at[change], kind[change], at[change - 1]


def waveform_edges(
    waveform: Waveform, threshold: float | None = None, hysteresis: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Fractional sample positions of a waveform's rising and falling edges (`find_edges`).

    Threshold and hysteresis come from the record's own levels when not given
    (`auto_threshold`); a record with a single level then has no edges. A
    waveform that keeps its codes is read on them.
    """
    record = _CodeRecord.of(waveform)
    if threshold is None or hysteresis is None:
        auto = _threshold(waveform, record)
        if threshold is None:
            if auto is None:
                return np.empty(0), np.empty(0)
            threshold = auto[0]
        if hysteresis is None:
            hysteresis = auto[1] if auto is not None else 0.0
    edges = None if record is None else record.edges(threshold, hysteresis)
    return find_edges(waveform.volts, threshold, hysteresis) if edges is None else edges


class _CodeRecord:
    """auto_threshold and find_edges on a record's integer codes (see the module's notes).

    `table` holds the volts of every code of the dtype, computed as Waveform.volts would
    compute them: a code's volts here are its sample's volts there, to the bit.
    """

    def __init__(self, codes: np.ndarray, scale: CodeScale) -> None:
        self.codes = np.ascontiguousarray(codes, dtype=codes.dtype.newbyteorder("="))
        info = np.iinfo(self.codes.dtype)
        self.first = int(info.min)
        self.table = scale.volts(np.arange(info.min, int(info.max) + 1))
        self._scanned: tuple[np.ndarray, np.ndarray] | None = None  # per-block lowest, highest code
        self._histogram_codes: np.ndarray | None = None  # every HISTOGRAM step-th code
        self._noise_codes: np.ndarray | None = None  # every _noise_step-th code

    @classmethod
    def of(cls, waveform: Waveform) -> _CodeRecord | None:
        codes, scale = waveform.codes, waveform.scale
        if codes is None or scale is None or codes.dtype.itemsize > CODE_PATH_ITEMSIZE:
            return None
        return cls(codes, scale)

    def volts_at(self, index: np.ndarray) -> np.ndarray:
        """The volts of the samples at `index` (any shape)."""
        return self.table[self.codes[index].astype(np.intp) - self.first]

    def _scan(self, samples: bool) -> tuple[np.ndarray, np.ndarray]:
        """The one pass over the record: each block's lowest and highest code and, with
        `samples`, the histogram's and the noise's strided samples (cache-sized slices)."""
        if self._scanned is not None and (not samples or self._noise_codes is not None):
            return self._scanned
        codes, n = self.codes, len(self.codes)
        low = np.empty(-(-n // BLOCK), codes.dtype)
        high = np.empty_like(low)
        block_starts = np.arange(0, CHUNK, BLOCK)
        histogram_step, noise_step = -(-n // HISTOGRAM_SAMPLES), _noise_step(n)
        histogram, noise = [], []
        for i in range(0, n, CHUNK):
            chunk = codes[i : i + CHUNK]
            starts = block_starts[: -(-len(chunk) // BLOCK)]
            j = i // BLOCK
            np.minimum.reduceat(chunk, starts, out=low[j : j + len(starts)])
            np.maximum.reduceat(chunk, starts, out=high[j : j + len(starts)])
            if samples:  # the samples v[::step] would give, taken while the slice is in cache
                if histogram_step > 1:  # (at step 1, the histogram counts the record itself)
                    histogram.append(chunk[-i % histogram_step :: histogram_step])
                noise.append(chunk[-i % noise_step :: noise_step])
        if samples:
            self._histogram_codes = np.concatenate(histogram) if histogram else codes
            self._noise_codes = np.concatenate(noise)
        self._scanned = low, high
        return low, high

    def _code_counts(self, codes: np.ndarray) -> np.ndarray:
        """How many times each code of the dtype occurs in `codes` (slice by slice: no
        full-size index array)."""
        # two's complement: negative codes at the top
        unsigned = codes.view(f"u{codes.dtype.itemsize}")
        counts = np.zeros(len(self.table), np.int64)
        for i in range(0, len(unsigned), CHUNK):
            counts += np.bincount(unsigned[i : i + CHUNK], minlength=len(self.table))
        return np.roll(counts, -self.first)  # table order: the lowest code first

    def auto_threshold(self, resolution_v: float) -> tuple[float, float] | None:
        """`auto_threshold(volts, resolution_v)` without the volts."""
        n = len(self.codes)
        if not n:
            return None
        low, high = self._scan(samples=True)
        assert self._histogram_codes is not None and self._noise_codes is not None
        # volts are monotonic in codes
        ends = self.table[[int(low.min()) - self.first, int(high.max()) - self.first]]
        lo, hi = float(ends.min()), float(ends.max())
        if not hi > lo:
            return None

        def counts_every(step: int) -> np.ndarray:
            assert self._histogram_codes is not None
            counts = self._code_counts(self._histogram_codes if step > 1 else self.codes)
            present = np.flatnonzero(counts)
            return _bin_counts(self.table[present], lo, hi, counts[present])

        noise = self.table[self._noise_codes.astype(np.intp) - self.first]
        return _levels(lo, hi, n, counts_every, noise, resolution_v)

    def edges(self, threshold: float, hysteresis: float) -> tuple[np.ndarray, np.ndarray] | None:
        """`find_edges(volts, threshold, hysteresis)` without the volts (None: use the volts)."""
        empty = np.empty(0)
        n = len(self.codes)
        if n < 2:
            return empty, empty
        half = max(hysteresis, 0.0) / 2
        t = self.table
        # the bands as code ranges: volts are monotonic in codes (float rounding is too), so
        # each band is the codes on one side of one code
        below, above = _band(t < threshold, self.first), _band(t > threshold, self.first)
        up = _band((t >= threshold + half) & (t > threshold), self.first)
        down = _band((t <= threshold - half) & (t < threshold), self.first)
        # cannot be; if it were, use the volts
        if any(band is False for band in (below, above, up, down)):
            return None
        compiled = self._compiled_transitions(up, down, below, above)
        if compiled is not None:
            k, rising = compiled
            if not len(k):
                return empty, empty
            return self._positions(k, rising, threshold)
        # the Schmitt state can change only in a block that holds samples of both bands, or
        # one whose bands differ from the block before's: only those are read sample by sample
        low, high = self._scan(samples=False)
        blocks = _changing(_meets(low, high, up), _meets(low, high, down))
        enter_up, enter_down = self._band_entries(blocks, up, down)
        change = _transitions(enter_up, enter_down)
        if change is None:
            return empty, empty
        first_new, rising, since = change
        k = self._last_on_old_side(first_new, since, rising, below, above)
        return self._positions(k, rising, threshold)

    def _positions(self, k: np.ndarray, rising: np.ndarray, threshold: float) -> tuple[np.ndarray,
                                                                                       np.ndarray]:
        """The rising and falling edges' positions: where the line from sample k to k + 1
        crosses."""
        v0, v1 = self.volts_at(k), self.volts_at(k + 1)
        position = k + (threshold - v0) / (v1 - v0)
        return position[rising], position[~rising]

    def _compiled_transitions(self, up: Band, down: Band, below: Band, above: Band
                              ) -> tuple[np.ndarray, np.ndarray] | None:
        """The transitions from the compiled walk (instruments/schmitt_kernel.py), or None where the
        numpy path runs: a short record, numba absent, or a scale whose volts fall as codes grow."""
        from instruments import schmitt_kernel

        if len(self.codes) < schmitt_kernel.MIN_SAMPLES or None in (up, down, below, above):
            return None
        assert up is not None and down is not None and below is not None and above is not None
        if (up[0], down[0], below[0], above[0]) != (np.greater_equal, np.less_equal, np.less_equal,
                                                    np.greater_equal):
            return None
        if schmitt_kernel.available() is not None:
            return None
        return schmitt_kernel.transitions(self.codes, up[1], down[1], below[1], above[1])

    def _band_entries(self, blocks: np.ndarray, up: Band, down: Band) -> tuple[np.ndarray,
                                                                               np.ndarray]:
        """Where runs of up and of down samples begin within `blocks`, read as one stream
        (see `_changing`): in each batch, the words of 8 samples where the band may change
        are kept (their up and down bytes as uint64, their position), then read at once."""
        n = len(self.codes)
        whole = n // BLOCK
        grid = self.codes[: whole * BLOCK].reshape(whole, BLOCK)
        # one set of buffers for all batches: fresh megabytes each time would cost page faults
        size = min(len(blocks), BATCH_BLOCKS) * BLOCK
        x_buffer = np.empty((size // BLOCK, BLOCK), self.codes.dtype)
        in_buffers = np.empty(size, bool), np.empty(size, bool)
        has_buffers = np.empty(size // WORD, bool), np.empty(size // WORD, bool)
        up_words, down_words, at = [], [], []
        for i in range(0, len(blocks), BATCH_BLOCKS):
            batch = blocks[i : i + BATCH_BLOCKS]
            full = batch[batch < whole]
            m = len(full) * BLOCK
            x = np.take(grid, full, axis=0, out=x_buffer[: len(full)], mode="clip").reshape(m)
            in_up = _within(x, up, in_buffers[0][:m]).view(np.uint64)
            in_down = _within(x, down, in_buffers[1][:m]).view(np.uint64)
            words = _changing(
                np.not_equal(in_up, 0, out=has_buffers[0][: m // WORD]),
                np.not_equal(in_down, 0, out=has_buffers[1][: m // WORD]),
            )
            up_words.append(in_up[words])
            down_words.append(in_down[words])
            at.append(full[words // (BLOCK // WORD)] * BLOCK + words % (BLOCK // WORD) * WORD)
        if whole * BLOCK < n and blocks[-1] == whole:  # the last block, shorter: all its words
            x = self.codes[whole * BLOCK :]
            for found, band in ((up_words, up), (down_words, down)):
                padded = np.zeros(-(-len(x) // WORD) * WORD, bool)  # a zero byte is no band sample
                padded[: len(x)] = _within(x, band)
                found.append(padded.view(np.uint64))
            at.append(whole * BLOCK + WORD * np.arange(len(padded) // WORD))
        word_at = _joined(at)
        entries = []
        for words in (up_words, down_words):
            f = _starts(np.concatenate(words).view(bool))
            entries.append(word_at[f // WORD] + f % WORD)
        return entries[0], entries[1]

    def _last_on_old_side(
        self, first_new: np.ndarray, since: np.ndarray, rising: np.ndarray, below: Band, above: Band
    ) -> np.ndarray:
        """For each transition, the last sample before `first_new` on the old side of the
        threshold (`below` it for a rise, `above` it for a fall); it lies at or after
        `since`, the entry of the old band, which is on that side."""

        def old_side(index: np.ndarray, rises: np.ndarray) -> np.ndarray:
            codes = self.codes[index]
            return np.where(rises, _within(codes, below), _within(codes, above))

        k = first_new - 1  # mostly the sample just before the new band's first
        todo = np.flatnonzero(~old_side(k, rising))
        k[todo] = -1
        # then a window before each edge, vectorised, in batches bounding its memory
        width, batch = 64, 1 << 12
        left = []
        for i in range(0, len(todo), batch):
            rows = todo[i : i + batch]
            p, q = first_new[rows], since[rows]
            index = p[:, None] - np.arange(1, width + 1)
            old = old_side(np.maximum(index, 0), rising[rows, None]) & (index >= q[:, None])
            found = old.any(axis=1)
            k[rows[found]] = p[found] - 1 - old[found].argmax(axis=1)
            left.append(rows[~found])
        for row in _joined(left):  # a long stay in the hysteresis band: walk back by growing slices
            p, q, span = int(first_new[row]), int(since[row]), 4096
            while k[row] < 0 and p > q:
                start = max(p - span, q)
                old = np.flatnonzero(old_side(np.arange(start, p), rising[row]))
                if len(old):
                    k[row] = start + old[-1]
                p, span = start, 2 * span
        return k


def _band(in_band: np.ndarray, first: int) -> Band | bool:
    """The codes where `in_band` (over the table of every code) as a comparison with one code:
    None if there are none, False if they are not the codes on one side of one."""
    codes = np.flatnonzero(in_band)
    if not len(codes):
        return None
    if codes[-1] - codes[0] + 1 != len(codes):
        return False
    if codes[-1] == len(in_band) - 1:
        return np.greater_equal, int(codes[0]) + first
    if codes[0] == 0:
        return np.less_equal, int(codes[-1]) + first
    return False


def _changing(has_up: np.ndarray, has_down: np.ndarray) -> np.ndarray:
    """The units (blocks, words) of a stream where the Schmitt state may change, given
    whether each holds up and down samples: the first, those holding both, and those whose
    bands differ from the unit before's.

    A unit left out holds the bands of the one before it, one band or none: the band its
    samples follow is that of the last band sample of the units kept, so reading the kept
    units alone as one stream finds every change of band (plus entries that change nothing).
    """
    kind = has_up.view(np.uint8) + has_up.view(np.uint8)  # (an add: a shift is slower)
    kind |= has_down.view(np.uint8)
    changing = np.empty(len(kind), bool)
    changing[:1] = True
    np.not_equal(kind[1:], kind[:-1], out=changing[1:])
    changing |= kind == 3
    return np.flatnonzero(changing)


def _meets(low: np.ndarray, high: np.ndarray, band: Band) -> np.ndarray:
    """Whether each block, given its lowest and highest code, holds a code of `band`."""
    if band is None:
        return np.zeros(len(low), bool)
    compare, code = band
    return compare(high if compare is np.greater_equal else low, code)


def _within(x: np.ndarray, band: Band, out: np.ndarray | None = None) -> np.ndarray:
    """Whether each code of `x` is in `band` (into `out` if given)."""
    if band is None:
        if out is None:
            return np.zeros(len(x), bool)
        out[:] = False
        return out
    compare, code = band
    return compare(x, code, out=out)


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


# --- pulses ----------------------------------------------------------------------------------
def extract_pulses(
    waveform: Waveform,
    threshold: float | None = None,
    hysteresis: float | None = None,
    polarity: Polarity = "high",
) -> Pulses:
    """The complete pulses of a waveform.

    `polarity` "high": a pulse is a rise then a fall (active-high line);
    "low": a fall then a rise. Without `threshold`, it comes from
    `auto_threshold`; without `hysteresis`, so does the hysteresis (0 if the
    record has a single level). A waveform that keeps its codes is read on them.
    """
    if polarity not in ("high", "low"):
        raise ValueError(f"polarity must be 'high' or 'low', got {polarity!r}")
    none = Pulses(np.empty(0), np.empty(0), waveform.index)
    rising, falling = waveform_edges(waveform, threshold, hysteresis)
    lead, trail = (rising, falling) if polarity == "high" else (falling, rising)
    if not len(lead):
        return none
    if len(trail) and trail[0] < lead[0]:
        trail = trail[1:]  # the record starts inside a pulse
    n = min(len(lead), len(trail))  # a lead without a trail: the record ends inside a pulse
    lead, trail = lead[:n], trail[:n]
    return Pulses(
        start_s=waveform.t0_s + lead * waveform.dt_s,
        width_s=(trail - lead) * waveform.dt_s,
        index=waveform.index,
    )


def extract_frame_pulses(frames: Frames, threshold: float | None = None,
                         hysteresis: float | None = None,
                         polarity: Polarity = "high") -> FramePulses:
    """The complete pulses of every frame, found in one pass over the frames end to end.

    One threshold serves every frame (from all of them, without `threshold`). A pulse counts
    only when both samples around its leading edge and both around its trailing edge lie in
    one frame: a pulse cut by a frame's start or end, or an edge made by joining two frames,
    is dropped, as the record's own ends are.
    """
    pulses = extract_pulses(frames.joined(), threshold, hysteresis, polarity)
    points = frames.points
    lead = (pulses.start_s - frames.t0_s) / frames.dt_s  # positions in the joined record
    trail = lead + pulses.width_s / frames.dt_s
    frame = np.floor(lead).astype(np.int64) // points
    whole = frame == np.ceil(trail).astype(np.int64) // points
    frame, lead = frame[whole], lead[whole]
    start = frames.trigger_s[frame] + frames.t0_s + (lead - frame * points) * frames.dt_s
    return FramePulses(start_s=start, width_s=pulses.width_s[whole], index=frames.index,
                       frame=frame)
