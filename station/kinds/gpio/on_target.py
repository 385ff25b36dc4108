"""A GPIO responder on a target: the kernel module's parameters and the user-space program's
command line (the cpufreq governor a case asks for: station/target/governors.py).

Every value comes from the validated campaign (names matched against fixed patterns, numbers
bounded); callers still quote every word they send.
"""

from __future__ import annotations

from station.kinds.gpio.settings import GpioCase, GpioSettings
from station.target.tools import Tool

RESPONDER_MODULE = "gpio_responder"
RESPONDER_PROGRAM = Tool("gpio_responder_user", libs=("gpiod",),
                         packages="gcc, libc6-dev and libgpiod-dev")
STIMULUS_EDGES = {"rise": "rising", "fall": "falling", "either": "both"}


def responder_edge(settings: GpioSettings, case: GpioCase) -> str:
    """The input edges the responder must answer: an echo copies the input's level, so it answers
    both; a toggle answers the measured stimulus edge."""
    return "both" if case.mode == "echo" else STIMULUS_EDGES[settings.stimulus_edge]


def module_params(settings: GpioSettings, case: GpioCase) -> dict[str, str]:
    """gpio_responder.ko's parameters for this case."""
    lines = settings.lines
    return {"chip": lines.chip, "in": str(lines.input), "out": str(lines.output),
            "edge": responder_edge(settings, case), "mode": case.mode,
            "threaded": str(int(case.threaded))}


def program_arguments(settings: GpioSettings, case: GpioCase) -> list[str]:
    """The user-space responder's options for this case (its path goes first)."""
    lines = settings.lines
    args = ["--chip", lines.chip, "--in", str(lines.input), "--out", str(lines.output),
            "--edge", responder_edge(settings, case), "--mode", case.mode]
    if case.priority:
        args += ["--priority", str(case.priority)]
    if case.responder == "sysfs":
        args.append("--sysfs")
    return args
