"""A traced module run's events split into stages (station/kinds/module/decomposition.py) and the
tracefs reader under it (station/parsers/tracefs.py).

Truth here is what the test wrote: a CPU's timeline generated event by event (which context ran
from when to when) and printed the way tracefs prints it, in both its forms; and a real trace
captured in the regular-kernel VM (tests/fixtures/tracefs/, README there) with the module's
own records of the same window. The VM campaign with injectors is tests/test_vm_campaign.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from station.kinds.module import decomposition as dec
from station.parsers import tracefs
from station.parsers.records import Flag

FIXTURES = Path(__file__).parent / "fixtures" / "tracefs"
IDS = {"irq_handler_entry": 152, "irq_handler_exit": 151, "softirq_entry": 150, "softirq_exit": 149,
       "local_timer_entry": 60, "local_timer_exit": 59, "hrtimer_expire_entry": 90, "hrtimer_expire_exit": 89,
       "sched_switch": 300, "nmi_handler": 70}
SYSTEM = {"irq_handler_entry": "irq", "irq_handler_exit": "irq", "softirq_entry": "irq", "softirq_exit": "irq",
          "local_timer_entry": "irq_vectors", "local_timer_exit": "irq_vectors", "hrtimer_expire_entry": "timer",
          "hrtimer_expire_exit": "timer", "sched_switch": "sched", "nmi_handler": "nmi"}
IDS_TEXT = "".join(f"{SYSTEM[n]}/{n}/id:{i}\n" for n, i in IDS.items())


@dataclass
class Written:
    """A trace as the test wrote it: both printed forms, and what it put where."""

    lines: list[str] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)

    def event(self, ts: int, name: str, args: str, ctx: str = "h", comm: str = "<idle>", pid: int = 0) -> None:
        usec = (ts + 500) // 1000  # tracefs rounds to the microsecond
        self.lines.append(f"{comm:>16}-{pid:<7} [001] d.{ctx}1. {usec // 10**6:5d}.{usec % 10**6:06d}: "
                          f"{name}: {args}")
        self.raw.append(f"{pid} 1 {ts} type: {IDS[name]}")

    def mark(self, ts: int, word: str) -> None:
        """A write to trace_marker, as module.trace_overhead's toggler makes them."""
        usec = (ts + 500) // 1000
        self.lines.append(f"           <...>-77      [001] ...1. {usec // 10**6:5d}.{usec % 10**6:06d}: "
                          f"tracing_mark_write: irq-station:{word}")
        self.raw.append(f"77 1 {ts} # ffffffff81498b1a irq-station:{word}")

    def lost(self, n: int) -> None:
        self.lines.append(f"CPU:1 [LOST {n} EVENTS]")
        self.raw.append(f"CPU:1 [LOST {n} EVENTS]")

    def parsed(self) -> tracefs.TraceEvents:
        return tracefs.parse("\n".join(self.lines), "\n".join(self.raw), IDS_TEXT)


def _records(rows: list[tuple[int, int, int]]) -> pd.DataFrame:
    seq, t_write, lat = zip(*rows, strict=True) if rows else ((), (), ())
    return pd.DataFrame({"seq": list(seq), "t_write_ns": list(t_write), "latency_ns": list(lat),
                         "flags": [0x100] * len(rows)})


# ---- the reader ------------------------------------------------------------------------------
def _fixture(name: str = "lpt-edu-6.1") -> tuple[str, str, str]:
    base = FIXTURES / name
    return tuple(Path(f"{base}.{part}.txt").read_text() for part in ("trace", "trace_raw", "trace_ids"))


def test_a_real_trace_gets_its_raw_nanoseconds_and_keeps_its_fields():
    text, raw, ids = _fixture()
    got = tracefs.parse(text, raw, ids)
    assert got.resolution_ns == 1 and got.note is None
    printed = tracefs.parse(text)
    assert printed.resolution_ns == 1000 and "no raw form" in printed.note
    assert len(got.events) == len(printed.events) == 200
    for exact, shown in zip(got.events, printed.events, strict=True):
        assert (exact.name, exact.args, exact.comm, exact.pid, exact.context) == \
               (shown.name, shown.args, shown.comm, shown.pid, shown.context)
        assert abs(exact.ts_ns - shown.ts_ns) <= 500  # the printed microsecond is the rounded nanosecond
    assert any(e.ts_ns % 1000 for e in got.events)  # and the raw form did add resolution
    handler = next(e for e in got.events if e.name == "irq_handler_entry" and "lpt_latency" in e.args)
    assert handler.context == "h" and "irq=7" in handler.args


def test_a_raw_form_that_does_not_match_is_not_trusted():
    text, raw, ids = _fixture()
    lines = raw.splitlines()
    short = "\n".join(lines[:20] + lines[21:])  # one event missing: read while the buffer changed
    got = tracefs.parse(text, short, ids)
    assert got.resolution_ns == 1000 and "raw form has 199 events" in got.note
    wrong_type = raw.replace(" type: 152", " type: 151", 1)  # an entry called an exit
    got = tracefs.parse(text, wrong_type, ids)
    assert got.resolution_ns == 1000 and "is not the printed" in got.note


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400), st.text(max_size=400), st.text(max_size=200))
def test_garbage_in_any_of_the_three_files_is_never_a_crash(text, raw, ids):
    got = tracefs.parse(text, raw, ids)
    assert got.resolution_ns in (1, 1000)
    assert all(0 <= e.ts_ns < tracefs.MAX_TS_NS for e in got.events)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_real_trace_cut_or_corrupted_is_read_or_refused_never_misread(data):
    text, raw, ids = _fixture()
    lines = text.splitlines()
    cut = data.draw(st.integers(0, len(lines)))
    noise = data.draw(st.text(max_size=40))
    got = tracefs.parse("\n".join(lines[:cut]) + noise, raw, ids)
    if got.resolution_ns == 1:  # trusted only when every event matched its raw line
        assert len(got.events) == len([ln for ln in raw.splitlines() if "type:" in ln])


# ---- the stages, against a timeline the test wrote -------------------------------------------
@st.composite
def timelines(draw):
    """One event of the module after an idle stretch: the timer interrupt that writes (its hrtimer
    callback with t_write inside), optionally a softirq, another device's handler and an NMI
    before the module's IRQ is taken, then its handler with t_irq inside. Returns the written
    trace, the record and the credits each stage must get."""
    w = Written()
    us = st.integers(1_000, 40_000)
    t = 10_000_000_000 + draw(st.integers(0, 999))
    w.event(t, "sched_switch", "prev_comm=sh prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=swapper/1 "
            "next_pid=0 next_prio=120", ctx=".", comm="sh", pid=9)
    t += draw(us)
    w.event(t, "local_timer_entry", "vector=236")
    t += draw(us)
    w.event(t, "hrtimer_expire_entry", "hrtimer=00000000aa function=lpt_tick [lpt_latency] now=1")
    t_write = t + draw(us)
    t = t_write + draw(us)
    delivery: dict[str, int] = {"hrtimer lpt_tick": t - t_write}
    w.event(t, "hrtimer_expire_exit", "hrtimer=00000000aa")
    loc = draw(us)
    t += loc
    delivery["local_timer interrupt (LOC)"] = loc
    w.event(t, "local_timer_exit", "vector=236")
    idle = draw(us)
    t += idle
    delivery["nothing traced (idle running)"] = idle
    if draw(st.booleans()):
        w.event(t, "softirq_entry", "vec=1 [action=TIMER]", ctx="s")
        soft = draw(us)
        t += soft
        w.event(t, "softirq_exit", "vec=1 [action=TIMER]", ctx="s")
        delivery["softirq TIMER"] = soft
        gap = draw(us)
        t += gap
        delivery["nothing traced (idle running)"] += gap
    if draw(st.booleans()):  # another device's handler first
        w.event(t, "irq_handler_entry", "irq=24 name=irqgap_inject")
        held = draw(st.integers(2_000, 400_000))
        nmi = draw(st.one_of(st.none(), st.integers(500, 900)))
        if nmi is not None:  # an NMI inside it, logged as it ends, with its length
            w.event(t + held - 100, "nmi_handler", f"handler=perf_event_nmi_handler delta_ns: {nmi} handled: 1")
            delivery["NMI perf_event_nmi_handler"] = nmi
            held_credit = held - nmi
        else:
            held_credit = held
        t += held
        w.event(t, "irq_handler_exit", "irq=24 ret=handled")
        delivery["IRQ 24 irqgap_inject"] = held_credit
        gap = draw(us)
        t += gap
        delivery["nothing traced (idle running)"] += gap
    entry = t
    w.event(entry, "irq_handler_entry", "irq=7 name=lpt_latency")
    t_irq = entry + draw(st.integers(100, 5_000))
    w.event(t_irq + draw(us), "irq_handler_exit", "irq=7 ret=handled")
    w.event(t_irq + 200_000, "local_timer_entry", "vector=236")
    return w, (0, t_write, t_irq - t_write), delivery, {"IRQ 7 lpt_latency": t_irq - entry}


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(timelines())
def test_each_stage_is_credited_to_what_the_timeline_ran(case):
    written, record, delivery, dispatch = case
    got = dec.decompose(_records([record]), written.parsed(), "lpt_latency")
    assert got.not_decomposed == {} and len(got.events) == 1
    row = got.events.iloc[0]
    credits = json.loads(row["credits"])
    assert credits == {"delivery": delivery, "dispatch": dispatch}
    assert row["delivery_ns"] + row["dispatch_ns"] == row["t_sw_ns"] == record[2]  # exactly
    assert row["delivery_ns"] == sum(delivery.values())
    assert row["delivery_culprit"] == max(delivery, key=delivery.get)


def test_events_outside_the_trace_or_across_lost_events_are_counted_not_guessed():
    w = Written()
    w.event(1_000_000, "sched_switch", "prev_comm=sh prev_pid=9 prev_prio=120 prev_state=S ==> "
            "next_comm=swapper/1 next_pid=0 next_prio=120", ctx=".", comm="sh", pid=9)
    w.event(2_000_000, "irq_handler_entry", "irq=7 name=lpt_latency")
    w.event(2_001_000, "irq_handler_exit", "irq=7 ret=handled")
    w.lost(3)
    w.event(3_000_000, "irq_handler_entry", "irq=7 name=lpt_latency")
    w.event(3_001_000, "irq_handler_exit", "irq=7 ret=handled")
    w.event(4_000_000, "irq_handler_entry", "irq=9 name=other")
    w.event(4_001_000, "irq_handler_exit", "irq=9 ret=handled")
    w.event(9_000_000, "local_timer_entry", "vector=236")
    records = _records([
        (0, 500_000, 100_000),  # before the trace's first event
        (1, 1_990_000, 10_500),  # fine: the entry at 2 000 000
        (2, 2_990_000, 10_500),  # the lost events fall between its write and its timestamp
        (3, 3_990_000, 20_000),  # an entry of another line only
        (4, 8_990_000, 20_000),  # past the trace's last event
    ])
    got = dec.decompose(records, w.parsed(), "lpt_latency")
    assert got.events["seq"].tolist() == [1]
    assert got.not_decomposed == {dec.REASON_BEFORE: 1, dec.REASON_LOST: 1, dec.REASON_NO_ENTRY: 1,
                                  dec.REASON_AFTER: 1}
    assert got.lost_events == 3


def test_an_event_the_module_flagged_off_cpu_is_counted_apart_not_paired_with_an_earlier_entry():
    """The trace holds the measured CPU only: an IRQ the kernel took on another CPU (the module
    flags it OFF_CPU) has no entry of its own there; the one before its write is another event's."""
    w = Written()
    w.event(500_000, "sched_switch", "prev_comm=sh prev_pid=9 prev_prio=120 prev_state=S ==> "
            "next_comm=swapper/1 next_pid=0 next_prio=120", ctx=".", comm="sh", pid=9)
    w.event(1_000_000, "irq_handler_entry", "irq=7 name=lpt_latency")
    w.event(1_001_000, "irq_handler_exit", "irq=7 ret=handled")
    w.event(3_000_000, "irq_handler_entry", "irq=7 name=lpt_latency")
    w.event(3_001_000, "irq_handler_exit", "irq=7 ret=handled")
    w.event(9_000_000, "local_timer_entry", "vector=236")
    records = _records([(0, 990_000, 20_000), (1, 1_990_000, 20_000), (2, 2_990_000, 20_000)])
    records.loc[1, "flags"] |= int(Flag.OFF_CPU)
    got = dec.decompose(records, w.parsed(), "lpt_latency")
    assert got.events["seq"].tolist() == [0, 2]
    assert got.not_decomposed == {dec.REASON_OFF_CPU: 1}


def test_a_context_whose_exit_was_not_traced_ends_where_the_trace_says_no_irq_runs():
    """Events enabled one by one, or lost: an entry without its exit. The next event in task
    context ends it; the time after is the task's, not a handler's that ran long ago."""
    w = Written()
    w.event(1_000_000, "irq_handler_entry", "irq=24 name=irqgap_inject")  # its exit was not traced
    w.event(1_500_000, "sched_switch", "prev_comm=sh prev_pid=9 prev_prio=120 prev_state=S ==> "
            "next_comm=swapper/1 next_pid=0 next_prio=120", ctx=".", comm="sh", pid=9)
    w.event(2_000_000, "hrtimer_expire_entry", "hrtimer=00000000aa function=lpt_tick now=1")
    w.event(2_010_000, "hrtimer_expire_exit", "hrtimer=00000000aa")
    w.event(2_030_000, "irq_handler_entry", "irq=7 name=lpt_latency")
    w.event(2_031_000, "irq_handler_exit", "irq=7 ret=handled")
    w.event(3_000_000, "local_timer_entry", "vector=236")
    got = dec.decompose(_records([(0, 2_005_000, 25_500)]), w.parsed(), "lpt_latency")
    credits = json.loads(got.events.iloc[0]["credits"])
    assert credits["delivery"] == {"hrtimer lpt_tick": 5_000, "nothing traced (idle running)": 20_000}


@pytest.mark.parametrize(("name", "events"), [("lpt-edu-6.1", 20), ("lpt-hrtimer-6.1-rt", 16)])
def test_the_real_trace_splits_every_record_of_its_window_exactly(name, events):
    text, raw, ids = _fixture(name)
    records = pd.read_csv(FIXTURES / f"{name}.records.csv")
    trace = tracefs.parse(text, raw, ids)
    # the hardirq/softirq letter where the header puts it (PREEMPT_RT adds two columns)
    assert {e.context for e in trace.events if e.name in ("irq_handler_entry", "hrtimer_expire_entry")} <= {"h", "H"}
    assert {e.context for e in trace.events if e.name == "sched_switch"} == {"."}
    got = dec.decompose(records, trace, "lpt_latency")
    assert got.not_decomposed == {} and len(got.events) == len(records) == events
    assert (got.events["delivery_ns"] + got.events["dispatch_ns"] == records["latency_ns"]).all()
    for row in got.events.itertuples():
        credits = json.loads(row.credits)
        assert "hrtimer lpt_tick" in credits["delivery"]  # the timer interrupt that wrote
        assert set(credits["dispatch"]) == {"IRQ 7 lpt_latency"}  # a hard handler: nothing between
        assert sum(credits["delivery"].values()) == row.delivery_ns


def test_the_report_explains_a_stage_that_grew_by_what_ran_in_it():
    stages = {"delivery": 120_000, "dispatch": 3_000}
    credits = {"delivery": {"hrtimer gap_hrtimer_tick": 100_000, "hrtimer lpt_tick": 5_000,
                            "nothing traced (idle running)": 15_000}, "dispatch": {"IRQ 7 lpt_latency": 3_000}}
    text = dec.explain(stages, credits, {"delivery": 20_000, "dispatch": 3_000}, 1)
    assert text.startswith("120.0 µs in delivery") and "hrtimer gap_hrtimer_tick ran 100.0 µs" in text
    assert "nothing traced (idle running) 15.0 µs" in text and "lpt_tick" not in text  # under a tenth
    quiet = dec.explain({"delivery": 90_000, "dispatch": 3_000},
                        {"delivery": {"nothing traced (idle running)": 90_000}}, {"delivery": 20_000}, 1)
    assert "with no handler, softirq or NMI traced on CPU 1" in quiet and "SMI" in quiet


@pytest.mark.parametrize("field_", ["trace", "format", "cpu", "family", "twin"])
def test_a_campaign_that_cannot_be_traced_is_refused_with_its_reason(tmp_path, field_):
    from station.config import load_campaign

    target = {"kind": "ssh", "host": "127.0.0.1", "user": "root", "family": "mainline",
              "known_hosts": str(tmp_path / "kh")}
    (tmp_path / "kh").write_text("")
    matrix = {"interfaces": ["lpt"], "variants": ["no-inb"], "period": "1ms", "samples": 100, "cpu": 1}
    if field_ == "format":
        matrix["format"] = "legacy"
    if field_ == "cpu":
        del matrix["cpu"]
    if field_ == "family":
        target["family"] = "rtai"
    if field_ == "twin":
        target = {"kind": "twin"}
    cfg = {"name": "t", "bench": {"target": target, "scope": {"kind": "none"}}, "matrix": matrix,
           "module": {"trace": True}}
    if field_ == "trace":
        cfg["module"] = {"trace": True, "trace_buffer_kb": 10}
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    expected = {"trace": "trace_buffer_kb", "format": "legacy record has no t_write", "cpu": "needs matrix.cpu",
                "family": "on RTAI the IRQ is taken by RTAI", "twin": "the twin has no kernel to trace"}[field_]
    with pytest.raises(Exception, match=expected) as err:
        load_campaign(path)
    assert "c.yaml:" in str(err.value)


def test_traced_and_untraced_blocks_come_from_the_marks_and_give_the_tracing_cost():
    """module.trace_overhead: the toggler marks each switch of the recording in the trace; an event
    wholly inside an unrecorded block, with nothing of its window recorded, is the reference; one
    caught while the recording was switched is in neither."""
    w = Written()
    ms = 1_000_000
    w.mark(10 * ms, "traced")
    rows = []
    truth = {"traced": [], "untraced": []}
    seq = 0
    for block in range(4):  # traced, untraced, traced, untraced: 100 ms each, an event every ms
        start = (10 + 100 * block) * ms
        kind = "traced" if block % 2 == 0 else "untraced"
        for k in range(5, 95):
            t_write = start + k * ms
            lat = (20_000 if kind == "traced" else 12_000) + (k % 7) * 1_000  # tracing adds 8 µs
            rows.append((seq, t_write, lat))
            if kind == "traced":
                w.event(t_write + lat - 2_000, "irq_handler_entry", "irq=7 name=lpt_latency")
                w.event(t_write + lat + 5_000, "irq_handler_exit", "irq=7 ret=handled")
            truth[kind].append(lat)
            seq += 1
        rows.append((seq, start + 99 * ms, 1_500_000))  # spans the switch: in neither block
        seq += 1
        if kind == "traced":  # recording stops just after the mark: a last event is still recorded
            w.mark(start + 100 * ms, "untracing")
            w.event(start + 100 * ms + 200_000, "local_timer_entry", "vector=236")
        else:  # and starts again just before the next
            w.event(start + 100 * ms - 100_000, "local_timer_exit", "vector=236")
            w.mark(start + 100 * ms, "traced")
    w.event(500 * ms, "local_timer_entry", "vector=236")
    trace = w.parsed()
    assert trace.resolution_ns == 1  # the marks' raw lines ("# <ip> <text>") are read too
    got = dec.decompose(_records(rows), trace, "lpt_latency", block_s=0.1)
    cost = got.overhead
    assert cost["traced"]["count"] == len(truth["traced"]) == len(got.events)
    assert cost["untraced"]["count"] == len(truth["untraced"])
    assert got.not_decomposed == {dec.REASON_UNTRACED: len(truth["untraced"]), dec.REASON_TRANSITION: 4}
    assert cost["median_added_ns"] == pytest.approx(8_000)
    assert cost["traced"]["median_ns"] == pytest.approx(float(pd.Series(truth["traced"]).median()))


def test_a_run_that_ends_in_an_unrecorded_block_keeps_its_last_events_as_reference():
    """The toggler stopped while the recording was off (it is stopped before the trace is read): the
    run's last events come after the trace's last event, inside the open unrecorded block: they are
    the reference, not "after the trace"; without a final `untracing` mark they are after it."""
    ms = 1_000_000
    for last_word in ("untracing", "traced"):
        w = Written()
        w.mark(10 * ms, "traced")
        rows = []
        for k in range(5, 95):  # a traced block
            t_write = 10 * ms + k * ms
            rows.append((len(rows), t_write, 20_000))
            w.event(t_write + 18_000, "irq_handler_entry", "irq=7 name=lpt_latency")
            w.event(t_write + 25_000, "irq_handler_exit", "irq=7 ret=handled")
        w.mark(110 * ms, last_word)
        w.event(110 * ms + 200_000, "local_timer_entry", "vector=236")
        after = [(len(rows) + k, 111 * ms + k * ms, 12_000) for k in range(30)]  # nothing recorded
        got = dec.decompose(_records(rows + after), w.parsed(), "lpt_latency", block_s=0.1)
        assert len(got.events) == 90
        if last_word == "untracing":
            assert got.not_decomposed == {dec.REASON_UNTRACED: 30}
            assert got.overhead["untraced"]["count"] == 30
            assert got.overhead["median_added_ns"] == pytest.approx(8_000)
        else:
            assert got.not_decomposed == {dec.REASON_AFTER: 30}
            assert got.overhead["untraced"]["count"] == 0


def test_a_run_directory_is_split_summarised_and_drawn(tmp_path):
    """decomposition.parquet at seal, then the report's summary and figure from it: the bands'
    stages add up to their mean t_SW, and every decomposed event is in one band."""
    from station.kinds.module.figures import stage_band_figures

    text, raw, ids = _fixture("lpt-hrtimer-6.1-rt")
    for part, content in (("trace.txt", text), ("trace_raw.txt", raw), ("trace_ids.txt", ids)):
        (tmp_path / part).write_text(content)
    records = pd.read_csv(FIXTURES / "lpt-hrtimer-6.1-rt.records.csv")
    dec.decompose_run(tmp_path, records, "lpt_latency")
    got = dec.summarise(tmp_path, sw_threshold_ns=float(records["latency_ns"].median()), cpu=1)
    assert got["decomposed"] == got["events"] == 16
    clock = got["clock_check"]
    assert clock["agrees"] and clock["checked"] == clock["in_window"] == 16
    lo, hi = clock["offset_within_ns"]
    assert lo <= 0 <= hi and hi - lo < records["latency_ns"].min()
    assert sum(b["events"] for b in got["bands"]) == 16
    for band in got["bands"]:
        assert band["delivery_mean_ns"] + band["dispatch_mean_ns"] == pytest.approx(band["t_sw_mean_ns"], rel=1e-12)
    assert got["largest"][0]["t_sw_ns"] == records["latency_ns"].max()
    assert got["outliers"]["count"] == int((records["latency_ns"] > records["latency_ns"].median()).sum())
    [figure] = stage_band_figures({"runs": [{"id": "lpt-r0", "decomposition": got}]})
    assert figure.kind == "stages" and "p99.9–p100" in figure.svg


def test_a_trace_clock_50_us_off_the_modules_decomposes_nothing_and_says_so(tmp_path):
    """The same real trace with the module's clock 50 µs behind the trace's (every record's write
    stamped 50 µs earlier): the IRQs' kernel entries now lie after their timestamps, so the check
    fails, no event is split on entries that belong to another time, and each counts as a clock
    mismatch; with the clocks as recorded, every event passes."""
    text, raw, ids = _fixture("lpt-hrtimer-6.1-rt")
    records = pd.read_csv(FIXTURES / "lpt-hrtimer-6.1-rt.records.csv")
    trace = tracefs.parse(text, raw, ids)
    assert dec.decompose(records, trace, "lpt_latency").clock["agrees"]
    shifted = records.assign(t_write_ns=records["t_write_ns"] - 50_000)
    got = dec.decompose(shifted, trace, "lpt_latency")
    assert not got.clock["agrees"] and got.events.empty
    assert got.not_decomposed == {dec.REASON_CLOCK: len(records)}
    assert got.clock["median_displacement_ns"] > 0  # the entries lie after the timestamps


def test_a_second_entry_of_the_line_before_a_threaded_timestamp_stays_in_dispatch():
    """Threaded handler: the write raises the line (entry 10 µs later); while the thread waits the
    line is raised again (a second entry at 40 µs); the thread stamps at 60 µs. Delivery ends at the
    first entry after the write: 10 µs, and the 50 µs wait is dispatch's."""
    w = Written()
    w.event(500_000, "sched_switch", "prev_comm=sh prev_pid=9 prev_prio=120 prev_state=S ==> "
            "next_comm=swapper/1 next_pid=0 next_prio=120", ctx=".", comm="sh", pid=9)
    w.event(1_010_000, "irq_handler_entry", "irq=7 name=lpt_latency")
    w.event(1_011_000, "irq_handler_exit", "irq=7 ret=handled")
    w.event(1_040_000, "irq_handler_entry", "irq=7 name=lpt_latency")
    w.event(1_041_000, "irq_handler_exit", "irq=7 ret=handled")
    w.event(9_000_000, "local_timer_entry", "vector=236")
    got = dec.decompose(_records([(0, 1_000_000, 60_000)]), w.parsed(), "lpt_latency")
    [row] = got.events.itertuples()
    assert (row.delivery_ns, row.dispatch_ns) == (10_000, 50_000)
