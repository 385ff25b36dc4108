"""How numbers are shown to people: ns → µs text, intervals and percentile trustworthiness.

JSON and CSV keep raw nanoseconds; the sentences the analysis writes (findings, verdicts) and
the HTML and Markdown documents go through here, so every page prints the same digits. It
imports nothing of the station: both analysis/ and report/ stand on it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: A percentile q of n samples is shown unmarked only if at least this many
#: samples are expected above it, n·(1 − q) ≥ MIN_TAIL_SAMPLES. Below that the
#: estimate is essentially one of the few largest samples (p99.999 of 100 000
#: samples *is* the maximum), so it is printed in italics with a dagger.
MIN_TAIL_SAMPLES = 10

MISSING = "—"

INTERFACE_LABEL = {"lpt": "LPT", "pcie": "PCIe"}

WEAK_PERCENTILE_NOTE = (
    f"† in italics: fewer than {MIN_TAIL_SAMPLES} samples are expected above this percentile "
    f"(count × (1 − q) < {MIN_TAIL_SAMPLES}), so it is little more than one of the largest "
    "samples; read it as a lower bound of the true tail."
)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def us(value_ns: Any, decimals: int = 3) -> str:
    """Nanoseconds as microseconds with ns resolution (3 decimals); '—' when absent."""
    if not is_number(value_ns):
        return MISSING
    text = f"{float(value_ns) / 1000.0:.{decimals}f}"
    # A tiny negative shift rounds to "-0.000"; the sign would claim a direction.
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def duration_us(value_us: float) -> str:
    """A duration in µs, ms or s, to 3 figures; the unit chosen after rounding (999.7 µs is
    1 ms, not "1e+03 µs")."""
    if value_us >= 999_500:
        return f"{value_us / 1e6:.3g} s"
    return f"{value_us / 1e3:.3g} ms" if value_us >= 999.5 else f"{value_us:.3g} µs"


def wall_time(seconds: float) -> str:
    """Bench time as a person reads it: "6 s", "5.2 s", "12 min 3 s", "2 h 5 min"."""
    if seconds < 60:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min" + (f" {secs} s" if secs else "")
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h" + (f" {minutes} min" if minutes else "")


def plain_us(value_us: Any, decimals: int | None = None) -> str:
    """A value already in µs, as cyclictest prints it: whole numbers bare, else ≤ 3 decimals.

    ``decimals`` fixes the count instead (a column of averages should line up).
    """
    if not is_number(value_us):
        return MISSING
    if decimals is not None:
        text = f"{float(value_us):.{decimals}f}"
    else:
        text = f"{float(value_us):.3f}".rstrip("0").rstrip(".")
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def us_interval(ci_ns: Any) -> str:
    """A [lo, hi] interval in ns as 'lo – hi' µs."""
    if not isinstance(ci_ns, list | tuple) or len(ci_ns) != 2:
        return MISSING
    return f"{us(ci_ns[0])} – {us(ci_ns[1])}"


def percentile_q(key: str) -> float | None:
    """'p99.99' → 0.9999; None for a key that is not a percentile."""
    if not key.startswith("p"):
        return None
    try:
        q = float(key[1:]) / 100.0
    except ValueError:
        return None
    return q if 0.0 <= q <= 1.0 else None


def percentile_keys(stats_list: Iterable[Mapping[str, Any] | None]) -> list[str]:
    """Union of percentile keys over several STATS dicts, ordered by q."""
    keys: set[str] = set()
    for stats in stats_list:
        if stats:
            found = stats.get("percentiles_ns") or {}
            keys.update(k for k in found if percentile_q(k) is not None)
    return sorted(keys, key=lambda k: percentile_q(k) or 0.0)


def percentile_is_reliable(key: str, count: Any) -> bool:
    q = percentile_q(key)
    if q is None or not is_number(count):
        return False
    # round: 100 000 × (1 − 0.9999) is 9.99999999999989 in binary floating point
    return round(count * (1.0 - q), 6) >= MIN_TAIL_SAMPLES


def count_text(value: Any) -> str:
    """A count with its thousands apart, 1 234 567: the report's one convention for counts."""
    return f"{int(value):,}".replace(",", " ") if is_number(value) else MISSING


# A bare integer of four digits or more: not part of a decimal, an exponent or a name (seed-2015).
_BARE_COUNT = re.compile(r"(?<![\w.,-])\d{4,}(?![\w.,])")
# Interface names the analysis wrote in capitals (str.upper()): "PCIE".
_SHOUTED = {label.upper(): label for label in INTERFACE_LABEL.values()}


def readable(text: str) -> str:
    """An analysis sentence in the report's conventions: counts grouped as count_text groups
    them, interfaces named as interface_label names them ("PCIe", not "PCIE")."""
    text = _BARE_COUNT.sub(lambda m: count_text(int(m.group())), text)
    return re.sub(r"\b(" + "|".join(_SHOUTED) + r")\b", lambda m: _SHOUTED[m.group()], text)


def slug(text: str) -> str:
    """A file-name and HTML-id safe form of a name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def unique_names(bases: Iterable[str]) -> list[str]:
    """Each base, suffixed -2, -3 … where an earlier one took it (anchors and file names)."""
    seen: set[str] = set()
    out = []
    for base in bases:
        name, k = base, 1
        while name in seen:
            k += 1
            name = f"{base}-{k}"
        seen.add(name)
        out.append(name)
    return out


def ordered(values: Iterable[Any], preferred: Iterable[Any] = (), *,
            keep_unseen: bool = False) -> list[Any]:
    """Distinct values, those in ``preferred`` first and in its order, then the rest as met.

    ``keep_unseen`` keeps preferred entries that never occur (a table row the
    analysis lists although nothing was measured for it).
    """
    seen = list(dict.fromkeys(values))
    first = [v for v in dict.fromkeys(preferred) if keep_unseen or v in seen]
    return first + [v for v in seen if v not in first]


def interface_label(interface: str) -> str:
    return INTERFACE_LABEL.get(interface, interface.upper())


def probability_interval(d: Mapping[str, Any]) -> str:
    """"[lo, hi]" of a probability's interval; a bound the estimate could not give is "?"."""
    def bound(v: Any) -> str:
        return f"{v:.2g}" if is_number(v) else "?"

    return f"[{bound(d.get('ci_low'))}, {bound(d.get('ci_high'))}]"
