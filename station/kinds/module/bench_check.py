"""The module kind's part of `station bench check` (station/bench/check.py): for each interface,
about one second of its latency module — its records at the campaign's period, and the scope's
configured channel seeing its pulses (station/bench/first_look.py) — then the module unloaded
and the reader stopped, on every exit path."""

from __future__ import annotations

import asyncio
import contextlib
import time

import numpy as np

from station.bench.bench import Bench
from station.bench.check import Checklist, Finding, StopCheck
from station.bench.first_look import check_scope
from station.common.lifetime import finish_then_cancel
from station.common.module_names import module_stem
from station.parsers import records
from station.target import TargetError, modules
from station.target import processes as proc_ctl

LOAD_S = 1.0  # at least this long with the module loaded
READER_LIMIT_S = 600  # the reader's own time limit on the target (a station that died mid-check)
READ_SLICE_S = 0.25  # how often the reader looks whether it may stop
RECORDS_SHARE = 0.5  # of the records the period promises: fewer is a module not answering
PERIOD_TOLERANCE = 0.1  # the median time between records against the period


async def check(bench: Bench, checklist: Checklist) -> None:
    assert bench.target is not None and bench.wiring is not None
    try:
        await bench.target.cleanup(within_s=30)  # what a crashed station left loaded
        for n, interface in enumerate(bench.campaign.matrix.interfaces):
            # one scope block serves every interface: proposed while the first one runs
            await _check_interface(bench, interface, checklist, propose=checklist.propose and not n)
    finally:
        with contextlib.suppress(TargetError):
            await bench.target.cleanup(within_s=30)


async def _check_interface(bench: Bench, interface: str, checklist: Checklist,
                           propose: bool) -> None:
    m, target = bench.campaign.matrix, bench.target
    assert target is not None
    family = target.settings.family
    stem, period_s = module_stem(family, interface), m.period
    params = modules.module_params(
        family, interface, period_ns=round(m.period * 1e9), check=True, cpu=m.cpu, fmt=m.format,
        fifo=target.settings.fifo, lpt_base=m.lpt_base, lpt_irq=m.lpt_irq,
        extra=m.module_params.get(interface))
    conn = await target.live_connection()
    loaded = time.monotonic()
    try:
        await finish_then_cancel(modules.insmod(conn, target.module_path(interface), params))
    except TargetError as exc:
        checklist.fail("module_load", f"{interface}: {exc}", _insmod_fix(str(exc)),
                       params=params)
    stream = None
    try:
        stream = await finish_then_cancel(proc_ctl.start_load(
            conn, proc_ctl.STREAM_NAME, f"cat {target.device(interface)}", target.work_dir,
            READER_LIMIT_S, binary=True, privileged=True))
    except TargetError as exc:
        with contextlib.suppress(TargetError):
            await modules.rmmod(conn, stem)
        checklist.fail("records", f"{interface}: the record stream could not be read: {exc}",
                       "the target's words are above (the device, sudo for setsid and cat)")
    reading: asyncio.Task | None = None
    try:
        started = time.monotonic()
        stop = asyncio.Event()
        reading = asyncio.create_task(_read(stream, m.format, stop))
        look = await _look(bench, period_s, propose)
        await asyncio.sleep(max(0.0, LOAD_S - (time.monotonic() - started)))
        stop.set()
        recs, ended = await reading
        elapsed = time.monotonic() - loaded  # the module numbers its records from insmod
    finally:
        if reading is not None and not reading.done():
            reading.cancel()
            await asyncio.wait([reading])  # its end, not its error (a cancel of ours still ends us)
        if stream is not None:
            with contextlib.suppress(TargetError):
                await proc_ctl.stop_load(stream)
        with contextlib.suppress(TargetError):
            await modules.rmmod(conn, stem)
    if propose:  # kept whatever the records say
        checklist.proposal, checklist.proposal_note = look.proposal, look.proposal_note
    _judge_records(checklist, interface, recs, ended, elapsed, period_s, m.format)
    for finding in look.findings:
        checklist.add(finding)


async def _read(stream: proc_ctl.TrackedProcess, fmt: str, stop: asyncio.Event
                ) -> tuple[np.ndarray, str]:
    """The records until `stop`; and why the stream ended early ("" if it did not)."""
    decoder = records.decoder_for(fmt)
    batches = []
    while not stop.is_set():
        try:
            async with asyncio.timeout(READ_SLICE_S):
                data = await stream.process.stdout.read(1 << 16)
        except TimeoutError:
            continue
        if not data:
            err = b""
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1):
                    err = await stream.process.stderr.read()
            text = err.decode(errors="replace").strip() if isinstance(err, bytes) else str(err)
            return _joined(batches, decoder.dtype), text or "the stream ended"
        batches.append(decoder.feed(data))
    return _joined(batches, decoder.dtype), ""


def _joined(batches: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
    return np.concatenate(batches) if batches else np.empty(0, dtype)


async def _look(bench: Bench, period_s: float, propose: bool) -> Checklist:
    """The scope's findings (and proposal) while the module runs (a thread: PyVISA blocks)."""
    cfg = bench.campaign.bench.scope
    assert bench.wiring is not None
    look = Checklist(propose=propose)
    if not bench.uses_scope or not bench.wiring.scope:
        look.findings.append(Finding("scope", True, "no scope on this bench (bench.scope.kind: "
                                     f"{cfg.kind}): t_SW only"))
        look.proposal_note = "no proposal: no scope on this bench"
        return look
    loop = asyncio.get_running_loop()
    with contextlib.suppress(StopCheck):
        await loop.run_in_executor(None, check_scope, cfg, bench.wiring.scope, period_s, look,
                                   propose)
    return look


def _judge_records(checklist: Checklist, interface: str, recs: np.ndarray, ended: str,
                   elapsed: float, period_s: float, fmt: str) -> None:
    expected = elapsed / period_s
    evidence = {"records": int(len(recs)), "seconds": round(elapsed, 2),
                "expected": round(expected)}
    if ended:
        checklist.fail("records", f"{interface}: the record stream ended after {len(recs)} "
                       f"records: {ended}", "the target's words are above; dmesg on the target "
                       "says what the module did", **evidence)
    if len(recs) < RECORDS_SHARE * expected:
        checklist.fail("records", f"{interface}: the module loaded, but sent {len(recs)} records "
                       f"in {elapsed:.1f} s where its period promises about {expected:.0f}",
                       "its interrupt is not arriving: check the wiring from the timer output "
                       "to the IRQ line (the LPT's ACK, the FPGA's MSI), that the port's IRQ is "
                       "enabled (BIOS, lpt_irq), and dmesg", **evidence)
    if fmt == "v1" and len(recs) > 2:
        t_write = recs["t_write_ns"].astype(np.int64)
        step = float(np.median(np.diff(t_write))) * 1e-9
        evidence |= {"median_step_s": step, "span_s": (t_write[-1] - t_write[0]) * 1e-9}
        if abs(step - period_s) > PERIOD_TOLERANCE * period_s:
            checklist.fail("records", f"{interface}: records come every {step * 1e6:.1f} µs, "
                           f"not at the period of {period_s * 1e6:g} µs",
                           "a module built from other sources, or a period the module rounds: "
                           "check its period_us parameter and dmesg", **evidence)
    checklist.ok("records", f"{interface}: {len(recs)} records in the {elapsed:.1f} s since "
                 f"insmod, at the period of {period_s * 1e6:g} µs", **evidence)


def _insmod_fix(error: str) -> str:
    """What to do about an insmod refusal, by the kernel's words."""
    if "Invalid module format" in error:
        return ("the module was built for another kernel: rebuild it against the running "
                "kernel's headers (target_modules/README.md)")
    if "Unknown symbol" in error:
        return ("load what the module needs first (RTAI: rtai_hal, rtai_sched, rtai_fifos), or "
                "fix the parameter dmesg names")
    if "busy" in error or "Device or resource busy" in error:
        return ("another driver holds the port or IRQ: unload it (lp, parport_pc, ppdev) or "
                "free the IRQ, then check again")
    if "Invalid parameters" in error or "Invalid argument" in error:
        return "dmesg names the parameter: correct it in the campaign (matrix.module_params)"
    return "dmesg on the target says why; fix that and check again"
