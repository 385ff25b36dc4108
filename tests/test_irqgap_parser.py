"""station.parsers.irqgap: realistic outputs, every error path, and garbage that must only ever
raise IrqgapOutputError."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from station.parsers.irqgap import FORMAT_VERSION, Gap, IrqgapOutput, IrqgapOutputError, parse

# as the program prints it on an x86 VM with the msr module loaded (shortened /proc/interrupts)
TSC_OUTPUT = """\
irqgap 1
clock tsc
tsc_hz 2596122120.6
cpu 1
threshold_ns 20000
priority 99
smi available
softirq 0 HI
softirq 1 TIMER
softirq 2 NET_TX
softirq 3 NET_RX
softirq 4 BLOCK
softirq 5 IRQ_POLL
softirq 6 TASKLET
softirq 7 SCHED
softirq 8 HRTIMER
softirq 9 RCU
irq 0 0 IO-APIC   2-edge      timer
irq 1 8 IO-APIC   8-edge      rtc0
irq 2 26 PCI-MSIX-0000:00:01.0   0-edge      virtio0-config
irq 3 NMI Non-maskable interrupts
irq 4 LOC Local timer interrupts
irq 5 RES Rescheduling interrupts
irq 6 PIN
start 19584308603532
gap 19584312512091 513145 0 0 4:1 9:1
gap 19584322988937 548458 1 0 - -
tick 19584808650035 47035726 2
irq 7 31 PCI-MSI 524288-edge      nvme0q1
gap 19585107064165 51063971 1 2 4:3,7:12 1:1,7:1,9:1
tick 19585308694716 95571614 3
end 19585808737073 144183560 3 33039307 7 duration
tsc_hz_end 2596122279.9
"""

MONO_OUTPUT = """\
irqgap 1
clock monotonic
cpu 0
threshold_ns 5000000
priority 0
smi unavailable open /dev/cpu/0/msr: No such file or directory
softirq 0 HI
softirq 1 TIMER
irq 0 LOC Local timer interrupts
start 100
gap 70000200 60000000 2 - 0:15 1:15
end 2000000300 39390175 1 22320876 20 signal
"""


def test_tsc_output():
    out = parse(TSC_OUTPUT)
    assert out.version == FORMAT_VERSION == 1
    assert (out.clock, out.cpu, out.threshold_ns, out.priority) == ("tsc", 1, 20000, 99)
    assert out.counter_hz == pytest.approx(2596122120.6)
    assert out.counter_hz_end == pytest.approx(2596122279.9)
    assert out.smi_available and out.smi_reason is None
    assert out.softirq_names[9] == "RCU" and len(out.softirq_names) == 10
    assert out.irq_lines[0] == ("0", "IO-APIC   2-edge      timer")
    assert out.irq_lines[6] == ("PIN", "")
    assert out.irq_lines[7] == ("31", "PCI-MSI 524288-edge      nvme0q1")
    assert out.start_ns == 19584308603532
    assert len(out.gaps) == 3
    g = out.gaps[2]
    assert g == Gap(19585107064165, 51063971, 1, 2, {4: 3, 7: 12}, {1: 1, 7: 1, 9: 1})
    assert g.start_ns == 19585107064165 - 51063971
    assert out.gaps[1].irqs == {} and out.gaps[1].softirqs == {}
    assert out.ticks == [(19584808650035, 47035726, 2), (19585308694716, 95571614, 3)]
    assert out.end == {
        "mono_ns": 19585808737073,
        "iterations": 144183560,
        "gaps": 3,
        "blind_ns": 33039307,
        "min_loop_ns": 7,
        "reason": "duration",
    }
    assert not out.torn


def test_monotonic_output():
    out = parse(MONO_OUTPUT)
    assert out.clock == "monotonic" and out.counter_hz is None and out.counter_hz_end is None
    assert not out.smi_available
    assert out.smi_reason == "open /dev/cpu/0/msr: No such file or directory"
    assert out.gaps == [Gap(70000200, 60000000, 2, None, {0: 15}, {1: 15})]
    assert out.gaps[0].start_ns == 10000200
    assert out.end is not None and out.end["reason"] == "signal"


def test_long_bookkeeping_is_read_as_blind_spans():
    out = parse(MONO_OUTPUT.replace("start 100\n", "start 100\nblind 9000000 6000000\n"))
    assert out.blind == [(9000000, 6000000)]
    with pytest.raises(IrqgapOutputError, match="duration_ns is not a non-negative integer"):
        parse(MONO_OUTPUT.replace("start 100\n", "start 100\nblind 9000000 -6\n"))


def test_unknown_keywords_are_ignored():
    text = MONO_OUTPUT.replace("start 100\n", "start 100\nfuture_thing 1 2 3\nX\n") + "later stuff here\n"
    assert parse(text) == parse(MONO_OUTPUT)


def test_torn_last_line_is_dropped():
    cut = TSC_OUTPUT[: TSC_OUTPUT.index("tsc_hz_end") + 7]
    out = parse(cut)
    assert out.torn and out.counter_hz_end is None and out.end is not None
    cut = MONO_OUTPUT[: MONO_OUTPUT.index("\ngap ") + 1 + 12]  # killed while writing a gap line
    out = parse(cut)
    assert out.torn and out.gaps == [] and out.end is None


def test_output_cut_at_a_line_boundary():
    out = parse(MONO_OUTPUT[: MONO_OUTPUT.index("\ngap ") + 1])
    assert not out.torn and out.start_ns == 100 and out.gaps == [] and out.end is None


def test_header_without_start():
    out = parse(MONO_OUTPUT[: MONO_OUTPUT.index("start ")])
    assert out.start_ns is None and out.irq_lines == {0: ("LOC", "Local timer interrupts")}


def _replace(old: str, new: str, text: str = MONO_OUTPUT) -> str:
    assert old in text
    return text.replace(old, new, 1)


BAD = [
    ("", "empty"),
    ("irqgap 1", "empty"),  # the only line, torn
    (_replace("irqgap 1\n", "cyclictest 1\n"), "not irqgap output"),
    (_replace("irqgap 1\n", "irqgap 2\n"), "version 2 is not supported"),
    (_replace("irqgap 1\n", "irqgap one\n"), "malformed magic"),
    (_replace("irqgap 1\n", "irqgap 1 2\n"), "malformed magic"),
    (_replace("cpu 0\n", "cpu 0\nirqgap 1\n"), "second magic"),
    (_replace("clock monotonic\n", "clock hpet\n"), "clock is not"),
    (_replace("cpu 0\n", "cpu -1\n"), "cpu is not a non-negative integer"),
    (_replace("cpu 0\n", "cpu 0 1\n"), "expected 1 field"),
    (_replace("cpu 0\n", "cpu  0\n"), "expected 1 field"),
    (_replace("cpu 0\n", "cpu 1_0\n"), "not a non-negative integer"),
    (_replace("cpu 0\n", "cpu ٣\n"), "not a non-negative integer"),
    (_replace("cpu 0\n", "cpu 0\ncpu 1\n"), "second 'cpu'"),
    (_replace("threshold_ns 5000000\n", ""), "no threshold_ns"),
    (_replace("clock monotonic\n", "clock tsc\n"), "no tsc_hz"),
    (_replace("clock monotonic\n", "clock tsc\ntsc_hz nan\n"), "tsc_hz is not a positive number"),
    (_replace("clock monotonic\n", "clock tsc\ntsc_hz 0.0\n"), "tsc_hz is not a positive number"),
    (_replace("clock monotonic\n", "clock tsc\ntsc_hz 1e999\n"), "tsc_hz is not a positive number"),
    (_replace("clock monotonic\n", "clock cntvct\n"), "no cntvct_hz"),
    (_replace("clock monotonic\n", "arch x86-64\nclock monotonic\n"), "arch is not a machine name"),
    (_replace("clock monotonic\n", "arch x86_64\narch aarch64\nclock monotonic\n"), "second 'arch'"),
    (_replace("clock monotonic\n", "clock cntvct\ntsc_hz 62500000.0\n"), "tsc_hz but the clock is cntvct"),
    (_replace("clock monotonic\n", "clock tsc\ntsc_hz 1e9\ncntvct_hz_end 62500000.0\n"),
     "cntvct_hz_end but the clock is tsc"),
    (_replace("clock monotonic\n", "clock cntvct\ncntvct_hz 62500000.0\ncntfrq_hz 0\n"),
     "cntfrq_hz is not a positive number"),
    (_replace("smi unavailable", "smi maybe"), "smi available"),
    (_replace("smi unavailable open /dev/cpu/0/msr: No such file or directory\n", ""), "no smi"),
    (_replace("softirq 1 TIMER\n", "softirq 0 TIMER\n"), "softirq index 0 declared twice"),
    (_replace("softirq 1 TIMER\n", "softirq 1\n"), "expected 2 field"),
    (_replace("softirq 1 TIMER\n", "softirq x TIMER\n"), "softirq index is not"),
    (_replace("irq 0 LOC", "irq 0  LOC"), "want 'irq <idx> <label>"),
    (_replace("irq 0 LOC Local timer interrupts\n", "irq 0\n"), "want 'irq <idx> <label>"),
    (_replace("start 100\n", "irq 0 NMI x\nstart 100\n"), "irq index 0 declared twice"),
    (_replace("start 100\n", "start 100\nstart 200\n"), "second 'start'"),
    (_replace("start 100\n", "start\n"), "expected 1 field"),
    (_replace("start 100\n", "start 100\ngap 1 2 3 - - -\n", MONO_OUTPUT.replace("cpu 0\n", "")), "no cpu"),
    (_replace("start 100\n", ""), "'gap' before 'start'"),
    (_replace("start 100\n", "tick 1 2 3\nstart 100\n"), "'tick' before 'start'"),
    (_replace("2 - 0:15", "2 - 0:15 1:1"), "expected 6 field"),
    (_replace("2 - 0:15", "2 5 0:15"), "SMI count although smi is unavailable"),
    (_replace("2 - 0:15", "2 -5 0:15"), "SMI count"),
    (_replace("gap 70000200", "gap x"), "end_mono_ns is not"),
    (_replace("60000000 2", "-60000000 2"), "duration_ns is not"),
    (_replace("0:15 1:15", "0:15 7:15"), "softirqs: index 7 was not declared"),
    (_replace("0:15 1:15", "3:15 1:15"), "irqs: index 3 was not declared"),
    (_replace("0:15 1:15", "0:15,0:2 1:15"), "index 0 twice"),
    (_replace("0:15 1:15", "0 1:15"), "is not idx:delta"),
    (_replace("0:15 1:15", "0:x 1:15"), "irqs delta is not"),
    (_replace("0:15 1:15", "0:15, 1:15"), "'' is not idx:delta"),
    (_replace("0:15 1:15", ":15 1:15"), "irqs index is not"),
    (_replace(" signal\n", " killed\n"), "end reason"),
    (_replace(" signal\n", "\n"), "expected 6 field"),
    (_replace(" signal\n", " signal\nend 1 2 3 4 5 signal\n"), "second 'end'"),
    (_replace("start 100\n", "start 100\n\n"), "no keyword"),
    (_replace("start 100\n", "start 100\n tick 1 2 3\n"), "no keyword"),
    (_replace("start 100\n", "start 100\r\n"), "start is not"),
    (_replace("end 2000000300", "tick 1 2\nend 2000000300"), "expected 3 field"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_errors(text, message):
    with pytest.raises(IrqgapOutputError, match=message):
        parse(text)


def test_error_names_the_line():
    with pytest.raises(IrqgapOutputError) as err:
        parse(_replace("0:15 1:15", "0:15 7:15"))
    assert "line 11" in str(err.value) and "gap 70000200 60000000 2 - 0:15 7:15" in str(err.value)
    assert isinstance(err.value, ValueError)


# ---- properties ------------------------------------------------------------------------------


def _render(out: IrqgapOutput) -> str:
    """The text the program would print for out (the counter's rate with one decimal, like %.1f)."""

    def deltas(d: dict[int, int]) -> str:
        return ",".join(f"{k}:{v}" for k, v in d.items()) or "-"

    lines = [f"irqgap {out.version}"] + ([f"arch {out.arch}"] if out.arch else []) + [f"clock {out.clock}"]
    if out.counter_hz is not None:
        lines.append(f"{out.clock}_hz {out.counter_hz:.1f}")
    if out.cntfrq_hz is not None:
        lines.append(f"cntfrq_hz {out.cntfrq_hz:.1f}")
    lines += [f"cpu {out.cpu}", f"threshold_ns {out.threshold_ns}", f"priority {out.priority}"]
    lines.append("smi available" if out.smi_available else f"smi unavailable {out.smi_reason}")
    lines += [f"softirq {i} {n}" for i, n in out.softirq_names.items()]
    lines += [f"irq {i} {lab} {desc}".rstrip(" ") for i, (lab, desc) in out.irq_lines.items()]
    lines.append(f"start {out.start_ns}")
    for g in out.gaps:
        smi = "-" if g.smi is None else g.smi
        lines.append(f"gap {g.end_ns} {g.duration_ns} {g.ctxsw} {smi} {deltas(g.irqs)} {deltas(g.softirqs)}")
    lines += [f"tick {m} {i} {n}" for m, i, n in out.ticks]
    lines += [f"blind {m} {d}" for m, d in out.blind]
    if out.end is not None:
        e = out.end
        lines.append(
            f"end {e['mono_ns']} {e['iterations']} {e['gaps']} {e['blind_ns']} {e['min_loop_ns']} {e['reason']}"
        )
    if out.counter_hz_end is not None:
        lines.append(f"{out.clock}_hz_end {out.counter_hz_end:.1f}")
    return "\n".join(lines) + "\n"


_u64 = st.integers(0, 2**64 - 1)
_token = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
_desc = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40).map(str.strip)
_hz = st.integers(10**8, 10**11).map(lambda n: n / 10)


@st.composite
def outputs(draw) -> IrqgapOutput:
    clock = draw(st.sampled_from(["tsc", "cntvct", "monotonic"]))
    tsc = clock != "monotonic"  # a raw counter: its rates are printed
    smi = draw(st.booleans())
    irq_lines = draw(st.dictionaries(st.integers(0, 500), st.tuples(_token, _desc), max_size=8))
    softirqs = draw(st.dictionaries(st.integers(0, 20), _token, max_size=5))

    def deltas(declared: dict) -> st.SearchStrategy[dict[int, int]]:
        if not declared:
            return st.just({})
        return st.dictionaries(st.sampled_from(sorted(declared)), st.integers(1, 10**9), max_size=4)

    gaps = draw(
        st.lists(
            st.builds(
                Gap,
                end_ns=_u64,
                duration_ns=_u64,
                ctxsw=st.integers(0, 10**6),
                smi=st.integers(0, 2**32 - 1) | st.none() if smi else st.none(),
                irqs=deltas(irq_lines),
                softirqs=deltas(softirqs),
            ),
            max_size=6,
        )
    )
    end = draw(
        st.none()
        | st.fixed_dictionaries(
            {
                "mono_ns": _u64,
                "iterations": _u64,
                "gaps": _u64,
                "blind_ns": _u64,
                "min_loop_ns": _u64,
                "reason": st.sampled_from(["duration", "signal"]),
            }
        )
    )
    return IrqgapOutput(
        version=1,
        clock=clock,
        arch=draw(st.none() | st.sampled_from(["x86_64", "aarch64"])),
        counter_hz=draw(_hz) if tsc else None,
        counter_hz_end=draw(_hz | st.none()) if tsc else None,
        cntfrq_hz=draw(_hz) if clock == "cntvct" else None,
        cpu=draw(st.integers(0, 8191)),
        threshold_ns=draw(st.integers(1, 10**12)),
        priority=draw(st.integers(0, 99)),
        smi_available=smi,
        smi_reason=None if smi else draw(_desc),
        irq_lines=irq_lines,
        softirq_names=softirqs,
        start_ns=draw(_u64),
        gaps=gaps,
        ticks=draw(st.lists(st.tuples(_u64, _u64, _u64), max_size=4)),
        blind=draw(st.lists(st.tuples(_u64, _u64), max_size=4)),
        end=end,
    )


@given(outputs())
@settings(max_examples=150, deadline=None)
def test_round_trip(out):
    assert parse(_render(out)) == out


def _parse_or_error(text: str) -> None:
    try:
        result = parse(text)
    except IrqgapOutputError:
        return
    assert isinstance(result, IrqgapOutput)


@given(st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_random_text(text):
    _parse_or_error(text)
    _parse_or_error("irqgap 1\n" + text)


_edit = st.tuples(
    st.sampled_from(["replace", "delete", "insert", "truncate", "swap_lines"]),
    st.integers(0, 10**6),
    st.integers(0, 40),
    st.text(st.sampled_from(list(" \n:,-0123456789abcgirqstx\r\t\x00é")), max_size=6),
)


@given(st.sampled_from([TSC_OUTPUT, MONO_OUTPUT]), st.lists(_edit, min_size=1, max_size=4))
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_output(text, edits):
    for op, pos, n, s in edits:
        pos %= len(text) + 1
        if op == "replace":
            text = text[:pos] + s + text[pos + len(s) :]
        elif op == "delete":
            text = text[:pos] + text[pos + n :]
        elif op == "insert":
            text = text[:pos] + s + text[pos:]
        elif op == "truncate":
            text = text[:pos]
        else:
            lines = text.split("\n")
            i, j = pos % len(lines), n % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    _parse_or_error(text)


@given(st.integers(0, len(TSC_OUTPUT)))
def test_every_truncation(cut):
    text = TSC_OUTPUT[:cut]
    try:
        out = parse(text)
    except IrqgapOutputError:
        # only an output cut inside its header may be refused
        assert "start " not in text
        return
    assert out.torn == (not text.endswith("\n"))
    assert len(out.gaps) <= 3
