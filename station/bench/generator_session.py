"""The generator side of a gpio campaign: open the instrument named in the campaign, configure the
stimulus once (output off), and switch the output on for each run and off after it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from instruments.funcgen import FunctionGenerator, GeneratorSettings, open_generator
from station.config import GeneratorSettingsConfig


class Stimulus(Protocol):
    """What a kind asks the generator to play (its BenchNeeds.stimulus; a gpio campaign's gpio:)."""

    period: float  # mean time between pulses (s)
    width: float  # pulse width (s)
    low: float  # V
    high: float  # V
    jitter: float  # the period's random spread (a fraction)


def stimulus_settings(cfg: GeneratorSettingsConfig, gpio: Stimulus) -> GeneratorSettings:
    return GeneratorSettings(channel=cfg.channel, frequency_hz=1.0 / gpio.period,
                             width_s=gpio.width,
                             low_v=gpio.low, high_v=gpio.high, jitter=gpio.jitter)


@dataclass
class GeneratorSession:
    generator: FunctionGenerator
    idn: str
    resource: str
    applied: GeneratorSettings

    @classmethod
    def open(cls, cfg: GeneratorSettingsConfig, resource: str, gpio: Stimulus) -> GeneratorSession:
        generator = open_generator(resource, dialect=cfg.dialect, timeout_s=cfg.timeout)
        try:
            idn = generator.identify()
            generator.reset()
            generator.set_output(False)  # nothing reaches the target until a run starts
            applied = generator.configure(stimulus_settings(cfg, gpio))
            generator.check_errors()
        except BaseException:
            generator.close()
            raise
        return cls(generator, idn, resource, applied)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def output(self, on: bool) -> None:
        with self._lock:
            self.generator.set_output(on)
            self.generator.check_errors()

    def not_answering(self) -> str | None:
        """None if the generator answers *IDN?; else why not."""
        with self._lock:
            try:
                self.generator.identify()
            # any failure means the same: the generator is gone
            except Exception as exc:  # noqa: BLE001
                return str(exc) or type(exc).__name__
        return None

    def close(self) -> None:
        try:
            with self._lock:
                self.generator.set_output(False)
        finally:
            self.generator.close()
