"""GPIO response timing's options: the campaign's gpio: section (its cases, lines and stimulus)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from station.config import Float, Int, LocatedError, Name, Seconds, Strict, Volts, _pattern
from station.target.governors import GOVERNORS

GPIO_PERIOD_RANGE = (10e-6, 10.0, "10 us", "10 s")
GPIO_WIDTH_RANGE = (100e-9, 5.0, "100 ns", "5 s")
GPIO_WINDOW_RANGE = (100e-9, 10.0, "100 ns", "10 s")
GPIO_LEVEL_RANGE = (-10.0, 10.0, "-10 V", "+10 V")  # a generator's output into high impedance
GPIO_CHIP = r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}"

# where the station starts nothing: a microcontroller, or a program of the user's own
GPIO_RESPONDERS = ("kernel", "chardev", "sysfs", "external")
# the seed's own Raspberry Pi programs, modelled by the twin only (station/twin/board.py)
TWIN_ONLY_RESPONDERS = ("sysfs-mmap", "python-mmap")


class GpioLines(Strict):
    """The target's GPIO lines, named as gpiolib names them (`gpioinfo` lists chips and lines)."""

    chip: Annotated[str, _pattern(GPIO_CHIP, "a gpiochip label, e.g. pinctrl-bcm2835")] = Field(
        "pinctrl-bcm2835",
        description="the label of the chip carrying both lines (Raspberry Pi 0-4: pinctrl-bcm2835 "
        "or pinctrl-bcm2711; Pi 5: pinctrl-rp1)"
    )
    input: Int = Field(17, ge=0, le=1023, description="offset of the line the stimulus drives")
    output: Int = Field(27, ge=0, le=1023, description="offset of the line the responder drives")

    @model_validator(mode="after")
    def _two_lines(self) -> GpioLines:
        if self.input == self.output:
            raise LocatedError(("output",),
                               f"is the input line too ({self.input}): the responder needs two "
                               "lines")
        return self


class GpioCase(Strict):
    """One way of answering the stimulus: a column of the seed's comparison."""

    responder: Literal[GPIO_RESPONDERS + TWIN_ONLY_RESPONDERS] = Field(  # type: ignore[valid-type]
        description="kernel: gpio_responder.ko sets the output in its interrupt handler; chardev: "
        "the user-space responder on the GPIO character device (libgpiod); sysfs: the same program "
        "through /sys/class/gpio; external: nothing is started (a microcontroller, or your own "
        "program); sysfs-mmap and python-mmap: the seed's Raspberry Pi programs, on the twin only"
    )
    threaded: bool = Field(False,
                           description="kernel: answer in a threaded handler instead of the hard "
                                       "one")
    mode: Literal["echo", "toggle"] = Field(
        "echo",
        description="echo: the output copies the input; toggle: it flips on each stimulus edge "
                    "(the seed)"
    )
    priority: Int = Field(0, ge=0, le=99,
                          description="chardev/sysfs: SCHED_FIFO priority (0: SCHED_OTHER)")
    governor: Literal[("keep", *GOVERNORS)] = Field(  # type: ignore[valid-type]
        "keep",
        description="the target's cpufreq governor for the run, restored afterwards (keep: leave "
                    "it)"
    )

    @model_validator(mode="after")
    def _options_fit(self) -> GpioCase:
        if self.threaded and self.responder != "kernel":
            raise LocatedError(("threaded",),
                               f"is a kernel responder option; this case's responder is "
                               f"{self.responder}")
        if self.priority and self.responder not in ("chardev", "sysfs"):
            raise LocatedError(("priority",),
                               f"is for the user-space responders; this case's is {self.responder}")
        return self


class GpioSettings(Strict):
    """GPIO response timing (seed 002), for matrix.kind: gpio: a generator drives the target's input
    line, a responder answers on its output line, the scope records both and every stimulus edge is
    paired with its response. A run ends after matrix.samples stimuli or matrix.duration."""

    cases: dict[Name, GpioCase] = Field(min_length=1, max_length=64,
                                        description="the responders to compare, by name")
    lines: GpioLines = GpioLines()
    period: Seconds(GPIO_PERIOD_RANGE) = Field(1e-3,
                                               description="mean time between stimulus pulses")
    jitter: Float = Field(
        0.25, ge=0.0, le=0.5, description="the period's random spread: each lasts between "
        "period/(1 + jitter) and period/(1 - jitter) (the generator's frequency modulated by "
        "noise), so the stimulus never locks to a periodic interrupt on the target (the lock hides "
        "or exaggerates timer collisions)"
    )
    width: Seconds(GPIO_WIDTH_RANGE) = Field(100e-6, description="stimulus pulse width")
    low: Volts(GPIO_LEVEL_RANGE) = 0.0
    high: Volts(GPIO_LEVEL_RANGE) = Field(3.3,
                                          description="stimulus high level (3.3 V for a Pi, 5 V "
                                                      "for an Uno)")
    response_channel: Int = Field(2, ge=1, le=4,
                                  description="scope channel on the output line (bench.scope."
                                  "channel is on the input line and triggers)")
    stimulus_edge: Literal["rise", "fall", "either"] = "rise"
    response_edge: Literal["auto", "rise", "fall", "either"] = Field(
        "auto", description="auto: the stimulus's edge for echo cases, either for toggle cases"
    )
    window: Literal["auto"] | Seconds(GPIO_WINDOW_RANGE) = Field(
        "auto",
        description="a stimulus not answered within this is missed; auto: 90 % of the shortest "
        "time between stimulus edges"
    )

    @model_validator(mode="after")
    def _timing_fits(self) -> GpioSettings:
        if not self.high > self.low:
            raise LocatedError(("high",), f"must be above low ({self.low:g} V)")
        if self.width >= self.shortest_interval_s(edges="pulse"):
            raise LocatedError(("width",), f"{self.width:g} s does not fit in the shortest period "
                               f"({self.shortest_interval_s(edges='pulse'):g} s = period / (1 + "
                               "jitter))")
        if self.window != "auto" and self.window >= self.shortest_interval_s():
            raise LocatedError(("window",),
                               "must be shorter than the shortest time between stimulus edges "
                               f"({self.shortest_interval_s():g} s): a late answer would pass for "
                               "the next one's")
        return self

    def shortest_interval_s(self, edges: str = "") -> float:
        """The shortest time between two stimulus edges of the measured direction."""
        period = self.period / (1.0 + self.jitter)  # the highest instantaneous frequency's
        if edges == "pulse" or self.stimulus_edge != "either":
            return period
        return min(self.width, period - self.width)

    def window_s(self) -> float:
        return 0.9 * self.shortest_interval_s() if self.window == "auto" else float(self.window)

    def response_edge_for(self, case: GpioCase) -> str:
        if self.response_edge != "auto":
            return self.response_edge
        return self.stimulus_edge if case.mode == "echo" else "either"
