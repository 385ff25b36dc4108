"""bench.twin: the built-in twin's settings (its seed, model overrides, clocks, scope replies)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from station.common.units import shorten
from station.config.types import (
    DURATION_RANGE,
    TWIN_CLOCK_HZ,
    TWIN_MAX_NS,
    Float,
    Int,
    Interface,
    LocatedError,
    Seconds,
    Strict,
    _not_bool,
    explain_validation_error,
)


def _twin_ns(lo_open: bool = False) -> Any:
    def check(value: float) -> float:
        if value < 0 or (lo_open and value == 0):
            raise ValueError(f"{value:g} ns: must be "
                             f"{'positive' if lo_open else 'zero or positive'}")
        if value > TWIN_MAX_NS:
            raise ValueError(f"{value:g} ns is too large: at most {TWIN_MAX_NS:g} ns (1 s)")
        return value

    return Annotated[float, BeforeValidator(_not_bool), AfterValidator(check)]


def _fraction(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{value:g}: a fraction is between 0 and 1")
    return value


def _spread(value: float) -> float:
    if not 0.0 < value <= 10.0:
        raise ValueError(f"{value:g}: idle_spread scales the loaded spread; between 0 (excluded) "
                         "and 10")
    return value


def _scale(value: float) -> float:
    if not 0.01 <= value <= 100.0:
        raise ValueError(f"{value:g}: phase_cycle_scale is between 0.01 and 100")
    return value


def _jitter(value: float) -> float:
    if not 0.0 <= value <= 2.0:
        raise ValueError(f"{value:g}: phase_jitter (a log-std) is between 0 and 2")
    return value


def _positive_ms(value: float) -> float:
    if not 0.001 <= value <= 60_000:
        raise ValueError(f"{value:g} ms: between 0.001 and 60000")
    return value


def _positive_s(value: float) -> float:
    if not 1.0 <= value <= 1e7:
        raise ValueError(f"{value:g} s: between 1 and 1e7")
    return value


def _clock(value: float) -> float:
    lo, hi = TWIN_CLOCK_HZ
    if value != 0 and not (lo <= value <= hi and value == int(value)):
        raise ValueError(f"{value:g} Hz: 0 (no board clock) or a whole number of Hz from {lo:g} to "
                         f"{hi:g}")
    return value


class TwinInterfaceOverrides(Strict):
    """The twin model's parameters (station/twin/model.py InterfaceParams), times in ns.
    A parameter left out keeps the preset's value (the None defaults are never validated,
    so an explicit null in the file is refused)."""

    t_rw: _twin_ns() = None
    t_rw_jitter: _twin_ns() = None
    sw_min: _twin_ns(lo_open=True) = None
    sw_mean: _twin_ns(lo_open=True) = None
    sw_std: _twin_ns(lo_open=True) = None
    idle_spread: Annotated[Float, AfterValidator(_spread)] = None
    tail_fraction: Annotated[Float, AfterValidator(_fraction)] = None
    tail_scale: _twin_ns() = None
    outlier_fraction: Annotated[Float, AfterValidator(_fraction)] = None
    outlier_delay: tuple[_twin_ns(), _twin_ns()] = None
    timer_jitter: _twin_ns() = None
    clock_hz: Annotated[Float, AfterValidator(_clock)] = None
    irq_delay_fraction: Annotated[Float, AfterValidator(_fraction)] = None
    irq_delay: tuple[_twin_ns(), _twin_ns()] = None
    bus_stretch_fraction: Annotated[Float, AfterValidator(_fraction)] = None
    bus_stretch: tuple[_twin_ns(), _twin_ns()] = None
    stray_fraction: Annotated[Float, AfterValidator(_fraction)] = None
    phase_shift_std: _twin_ns() = None
    phase_cycle_scale: Annotated[Float, AfterValidator(_scale)] = None
    phase_jitter: Annotated[Float, AfterValidator(_jitter)] = None
    carryover_std: _twin_ns() = None
    carryover_ms: Annotated[Float, AfterValidator(_positive_ms)] = None
    run_offset_std: _twin_ns() = None
    drift_std: _twin_ns() = None
    drift_period_s: Annotated[Float, AfterValidator(_positive_s)] = None
    restart_every: Int | None = Field(None, ge=0, le=10**12,
                                      description="a fault: the twin's module numbers its records "
                                      "from 0 again every this many numbers (a module reloaded "
                                      "mid-run); 0: never")

    @model_validator(mode="after")
    def _delay_interval(self) -> TwinInterfaceOverrides:
        for name in ("outlier_delay", "irq_delay", "bus_stretch"):
            delay = getattr(self, name)
            if delay is not None and delay[0] > delay[1]:
                raise LocatedError((name,), "[low, high] with low <= high")
        return self


_TWIN_OVERRIDES = TypeAdapter(dict[Interface, TwinInterfaceOverrides])


def _ppm(value: float) -> float:
    if abs(value) > 1000:
        raise ValueError(f"{value:g} ppm: a clock that far off is broken (at most ±1000 ppm)")
    return value


Ppm = Annotated[Float, AfterValidator(_ppm)]


class TwinSlew(Strict):
    """A while during which the target's clock is steered (NTP slewing its frequency)."""

    at: Seconds(DURATION_RANGE) = Field(description="when it starts, from the twin's start")
    ppm: Ppm = Field(description="how much faster (negative: slower) the clock runs meanwhile")
    duration: Seconds(DURATION_RANGE) = Field(description="how long it lasts")


class TwinClocks(Strict):
    """The twin's clocks against the host's (docs/twin.md): the target's crystal and its slews, the
    scope's timebase. The defaults are realistic assumptions, so every twin campaign drifts."""

    target_drift_ppm: Ppm = 35.0
    target_slews: list[TwinSlew] = Field(default_factory=list, max_length=100)
    scope_timebase_ppm: Ppm = 10.0
    scope_trigger_error_ns: Float = Field(
        0.5, ge=0.0, le=1e6, allow_inf_nan=False,
        description="rms error of where the scope puts its time zero against the true crossing (ns)"
    )


class TwinScopeReplies(Strict):
    """How the twin's MSO (tektronix_mso) frames what its vendor leaves undocumented
    (docs/scopes/tektronix-mso.md): each variant the driver must take, for a campaign to run on."""

    frame_separator: Literal["none", "semicolon"] = Field(
        "none", description="between a FastFrame CURVe? reply's frame blocks: nothing, or ';'")
    time_stamps: Literal["numbered", "numbered-semicolons", "numbered-quoted", "dpo"] = Field(
        "numbered",
        description="HORizontal:FASTframe:TIMEStamp:ALL?'s form: the 4/5/6 manual's 'frame #: "
        "stamp' list, with ';' between stamps, each stamp quoted, or the older DPO family's quoted "
        "stamps")


# the bench faults the twin can play on purpose (station/twin/miswire.py plays them)
Miswire = Literal["other_channel", "probe_x10", "inverted", "trigger_above_pulse",
                  "short_record", "module_other_kernel", "unplugged", "response_other_channel",
                  "board_unplugged"]
MISWIRES: tuple[str, ...] = get_args(Miswire)
GPIO_MISWIRES = frozenset({"response_other_channel", "board_unplugged"})  # a gpio bench's only


class LoadEffect(Strict):
    """What one load set does to the twin's latency while it runs (its truth, logged in
    campaign.json's twin summary): a worst-load search (docs/stopping.md) can then be checked
    against a known worst."""

    shift_ns: Float = Field(0.0, ge=-2000.0, le=100_000.0,
                            description="every loaded event later by this much (ns): the loaded "
                            "distribution shifted whole (its floor and mean)")
    tail_fraction: Float | None = Field(
        None, ge=0.0, le=0.01, description="the share of events with a late IRQ-side tail while "
        "it runs (default: the preset's)")


class TwinSettings(Strict):
    """The built-in twin: an emulated target (SSH) and scope (SCPI) on 127.0.0.1."""

    preset: str = "seed-2015"
    seed: Int = Field(2015, ge=0, lt=2**64)
    ground_truth: bool = True
    independent: bool = Field(
        False, description="every event an independent draw: no load phases, carry-over, run "
        "offset or drift (the twin before issue 46; docs/twin.md)")
    clocks: TwinClocks = Field(default_factory=TwinClocks)
    scope_replies: TwinScopeReplies = Field(default_factory=TwinScopeReplies)
    miswire: list[Miswire] = Field(
        default_factory=list, max_length=len(MISWIRES),
        description="bench faults the twin plays on purpose, to try `station bench check` "
        "(docs/bench-bring-up.md): other_channel (the probe on the next channel), probe_x10 (a ×10 "
        "probe, the scope at ×1), inverted (an active-low line), trigger_above_pulse (the line "
        "swings below the trigger level), short_record (the time base stops at 2 µs/div), "
        "module_other_kernel (module files built for another kernel), unplugged (no pulses "
        "anywhere); a gpio campaign's bench also: response_other_channel (the response probe on "
        "another channel), board_unplugged (the generator's output reaches the scope but not the "
        "board's input line)")
    load_effects: dict[str, LoadEffect] = Field(
        default_factory=dict, description="per load set (a name under loads:), what it does to "
        "the latency while it runs; the others load the twin as the preset says")
    overrides: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per-interface model parameters replacing the preset's, e.g. {pcie: "
        "{outlier_fraction: 5e-5}}; times in ns, fractions within [0, 1]",
    )

    @field_validator("miswire")
    @classmethod
    def _each_fault_once(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"a fault is named twice: {value}")
        return value

    @field_validator("preset")
    @classmethod
    def _preset_exists(cls, value: str) -> str:
        from station.twin.model import load_preset

        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", value):
            raise ValueError(f"{shorten(value)} is not a preset name (letters, digits, '_', '-')")
        load_preset(value)  # raises with the names it knows
        return value

    @field_validator("overrides", mode="before")
    @classmethod
    def _overrides_in_range(cls, value: object) -> dict[str, dict[str, Any]]:
        try:
            parsed = _TWIN_OVERRIDES.validate_python(value)
        except ValidationError as exc:
            loc, message = explain_validation_error(exc.errors()[0], TwinInterfaceOverrides)
            raise LocatedError(loc, message) from None
        return {iface: o.model_dump(exclude_unset=True) for iface, o in parsed.items()}

    @model_validator(mode="after")
    def _model_can_be_calibrated(self) -> TwinSettings:
        # a shipped preset as it is: tests/test_twin_model.py calibrates each (and
        if not self.overrides:
            return self  # config's own default would otherwise import scipy for every command)
        from station.twin.model import latency_shape, load_preset

        preset = load_preset(self.preset).with_overrides(self.overrides)
        preset = preset.independent() if self.independent else preset
        for iface, p in preset.interfaces.items():
            where = ("overrides", iface) if iface in self.overrides else ("preset",)
            name = "" if iface in self.overrides else f"{iface}: "
            if not p.sw_min < p.sw_mean:
                raise LocatedError(where,
                                   f"{name}sw_mean ({p.sw_mean:g}) must exceed sw_min "
                                   f"({p.sw_min:g})")
            if p.t_rw > p.sw_min:
                raise LocatedError(
                    where,
                    f"{name}t_rw ({p.t_rw:g}) exceeds sw_min ({p.sw_min:g}); t_SW includes one bus "
                    "access"
                )
            try:
                for spread in (1.0, p.idle_spread):
                    latency_shape(p, preset.calibration_samples, spread)
            # scipy's solver says little; say what to change
            except Exception as exc:  # noqa: BLE001
                raise LocatedError(
                    where,
                    f"{name}the latency model cannot be calibrated to sw_min/sw_mean/sw_std = "
                    f"{p.sw_min:g}/{p.sw_mean:g}/{p.sw_std:g} ns ({type(exc).__name__})",
                ) from None
        return self
