"""The simulated microcontroller's options: the campaign's avrsim: section (its cases and
stimulus)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from station.config import Int, LocatedError, Name, Seconds, Strict

CLOCK_HZ = 16_000_000  # the harness's ATmega328P runs at an Uno's 16 MHz
# the stimulus in seconds, as the gpio kind gives it; the harness counts whole CPU cycles
AVR_PERIOD_RANGE = (20e-6, 10e-3, "20 us", "10 ms")  # above the longest handler + a response
AVR_JITTER_RANGE = (0.0, 10e-3, "0 s", "10 ms")
AVR_WIDTH_RANGE = (125e-9, 5e-3, "125 ns", "5 ms")
FIRMWARES = ("responder", "sketch")


def cycles(seconds: float) -> int:
    """A time in whole CPU cycles (the nearest)."""
    return round(seconds * CLOCK_HZ)


class AvrCase(Strict):
    """One firmware build answering the edges: a column of the seed's comparison."""

    firmware: Literal[FIRMWARES] = Field(  # type: ignore[valid-type]
        description="responder: the bare avr-libc responder (target_modules/avr/responder.c, INT0 "
        "toggles PD7); sketch: the seed's sketch on Debian's Arduino core "
        "(target_modules/avr/sketch/responder_sketch.ino: attachInterrupt on pin 2, digitalWrite "
        "of pin 7)"
    )
    timer0: Literal["enabled", "masked"] = Field(
        "enabled",
        description="enabled: timer0's overflow interrupt runs as the Arduino core sets it up "
        "(976.5625 Hz), and delays an edge that arrives while its handler runs; masked: TOIE0 "
        "cleared, as the seed's figure was taken"
    )


class AvrsimSettings(Strict):
    """GPIO response of an ATmega328P simulated cycle by cycle (simavr; seed 002), for matrix.kind:
    avrsim: the harness drives the input pin with jittered rising edges and logs every output change
    and every interrupt handler run; each edge is paired with the change that answers it. A run ends
    after matrix.samples edges. The simulation runs on the station's own machine (bench.target.kind:
    local), where the firmware is built (gcc-avr, avr-libc, libsimavr-dev, arduino-core-avr)."""

    cases: dict[Name, AvrCase] = Field(min_length=1, max_length=16,
                                       description="the builds to compare, by name")
    period: Seconds(AVR_PERIOD_RANGE) = Field(125e-6,
                                              description="least time between two rising edges")
    jitter: Seconds(AVR_JITTER_RANGE) = Field(
        125e-6, description="each gap is period + uniform[0, jitter): at least a few cycles (well "
        "over timer0's phase), so the edges do not lock to timer0's overflow"
    )
    width: Seconds(AVR_WIDTH_RANGE) = Field(6.25e-6, description="the input pulse's width")
    seed: Int = Field(1, ge=0, le=2**32 - 1,
                      description="the edges' random seed (each run adds its ordinal)")

    @model_validator(mode="after")
    def _cycles_fit(self) -> AvrsimSettings:
        if cycles(self.width) >= cycles(self.period):
            raise LocatedError(("width",),
                               f"{self.width:g} s does not fit in the period ({self.period:g} s)")
        if self.jitter and cycles(self.jitter) < 16:
            raise LocatedError(("jitter",),
                               f"{self.jitter:g} s is under 16 cycles (1 us): the edges would "
                               "sample timer0's overflow at a few fixed phases (0 turns the "
                               "jitter off)")
        return self
