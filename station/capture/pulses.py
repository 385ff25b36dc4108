"""The scope's pulses as tables: every column a pulse table may have, with its type, unit and
meaning, once; and the orders the station writes them in (a module run's stream, a capture file)
and reads them back (pairing)."""

from __future__ import annotations

from instruments.rise_time import MIN_SAMPLES

#: Every column of a pulse table: (type, unit, meaning).
PULSE_COLUMNS: dict[str, tuple[str, str | None, str]] = {
    "acquisition": ("int64", None, "the acquisition (one arming of the scope), from 0"),
    "frame": (
        "int64", None,
        "the frame of a segmented acquisition the pulse lies in, from 0 (0 in waveform mode)"
    ),
    "start_s": (
        "float64",
        "s",
        "time of the pulse's leading edge (threshold crossing) after the acquisition's "
        "first trigger (segmented: frame 0's; each frame placed by the scope's time tag)",
    ),
    "width_s": (
        "float64", "s",
        "pulse width t_HW: leading to trailing threshold crossing, linearly interpolated"
    ),
    "rise_s": (
        "float64",
        "s",
        "10-90 % rise time of the leading edge between the record's low and high levels "
        f"(histogram modes), linearly interpolated; NaN where fewer than {MIN_SAMPLES} samples lie "
        "on "
        "the edge (the sample interval does not resolve it) or the edge is cut by the record",
    ),
    "armed_host_s": (
        "float64", "s",
        "the host's wall clock (Unix time, time.time()) just before the acquisition was armed"
    ),
}
#: what the event pairing reads of the pulses
PAIRING_ORDER = ("acquisition", "start_s", "width_s", "armed_host_s")
#: a module run's hw_pulses.csv, streamed per acquisition
STREAM_ORDER = (*PAIRING_ORDER, "frame")
#: a `station scope capture` file
CAPTURE_ORDER = ("acquisition", "frame", "start_s", "width_s", "rise_s", "armed_host_s")


def csv_header(order: tuple[str, ...]) -> str:
    return ",".join(order) + "\n"
