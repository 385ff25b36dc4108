"""cocotb testbench for the committed fpga/verilog/mkIrqEchoer.v (the file Quartus compiles).

Written from fpga/registers.yaml, fpga/README.md ("Timing, in cycles of the design clock")
and the seed's description, independently of the Bluesim testbench (test/TbIrqEchoer.bsv),
so that the two check each other. Run it with fpga/test/cocotb/run.py (Icarus Verilog).

The testbench is the Qsys interconnect's side of the Avalon-MM slave port: it presents one
transfer at a time, holds it while waitrequest is high, lets reads pipeline and collects
read data by readdatavalid. Inputs change at the falling edge of CLK and everything is
sampled just before the next rising edge, so each sample is what the DUT's flip-flops see
at that edge. Edges are numbered by simulated time (edge n at n clock periods): every
cycle count the DUT reports is checked against that, the simulator's own count.

A protocol checker watches every sample of every test and fails the test on a violation:
read data without a read, more or fewer than one readdatavalid per accepted read, a
response while waitrequest is high, more reads in flight than the component declares
(maximumPendingReadTransactions in irq_echoer_hw.tcl), waitrequest low in reset, unknown
(X/Z) control outputs, and, on the master side, a transfer changed while waitrequest held it.
"""

from __future__ import annotations

import os
import random
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import cocotb
import yaml
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

FPGA = Path(__file__).resolve().parents[2]
MAP = yaml.safe_load((FPGA / "registers.yaml").read_text())
REG = {r["name"]: r["offset"] // 4 for r in MAP["registers"]}
CONST = {c["name"]: c["value"] for c in MAP["constants"]}
OTHER_VALUE = CONST["OTHER_VALUE"]
VERSION = (MAP["version"]["major"] << 16) | MAP["version"]["minor"]
ADDR_WORDS = 1 << MAP["address_width"]
READABLE = {REG[r["name"]] for r in MAP["registers"] if r["access"] != "wo"}
UNLISTED = [a for a in range(ADDR_WORDS) if a not in REG.values()]
STATUS_IRQ = next(
    f for r in MAP["registers"] if r["name"] == "STATUS" for f in r["fields"] if f["name"] == "IRQ"
)
STATUS_IRQ_MASK = 1 << STATUS_IRQ["bits"][1]

_TCL = (FPGA / "irq_echoer_hw.tcl").read_text()
MAX_PENDING_READS = int(re.search(r"s0 maximumPendingReadTransactions (\d+)", _TCL).group(1))
# Avalon sets no bound on read latency with readdatavalid; a read this old is lost.
MAX_READ_WAIT = 32

CLOCK_HZ = int(os.environ.get("ECHOER_CLOCK_HZ", MAP["clock_hz_default"]))
PERIOD_PS = 10**12 // CLOCK_HZ
assert PERIOD_PS * CLOCK_HZ == 10**12, (
    f"ECHOER_CLOCK_HZ={CLOCK_HZ}: the period must be a whole number of ps"
)

M32 = (1 << 32) - 1
M64 = (1 << 64) - 1


def _level(handle) -> int | None:
    """An output's value as an int, None if any bit is X or Z."""
    text = str(handle.value)
    return int(text, 2) if text and set(text) <= {"0", "1"} else None


def _now_ps() -> int:
    return round(get_sim_time("ps"))


@dataclass
class Sample:
    """The pins in the cycle that ends at rising edge `edge` (what the DUT sees at it)."""

    edge: int
    rst_n: int
    read: int
    write: int
    address: int
    writedata: int
    waitrequest: int | None
    readdatavalid: int | None
    readdata: int | None
    irq: int | None
    tap: int | None

    @property
    def accepted(self) -> bool:
        # A transfer at an edge that samples reset is dropped: the interconnect resets there too.
        return bool(self.rst_n and (self.read or self.write) and self.waitrequest == 0)


@dataclass
class Op:
    """One Avalon transfer as the master issues it; `gap` idle cycles go before it."""

    write: bool
    address: int
    data: int = 0
    gap: int = 0
    accepted: int | None = None  # edge at which the slave took it
    responded: int | None = None  # edge that captured its readdata (reads)
    rdata: int | None = None
    abandoned: bool = False  # a reset dropped it in flight
    done: bool = False


def rd(name_or_addr, gap: int = 0) -> Op:
    addr = REG[name_or_addr] if isinstance(name_or_addr, str) else name_or_addr
    return Op(False, addr, gap=gap)


def wr(name_or_addr, data: int, gap: int = 0) -> Op:
    addr = REG[name_or_addr] if isinstance(name_or_addr, str) else name_or_addr
    return Op(True, addr, data & M32, gap=gap)


class ProtocolChecker:
    """Avalon-MM rules for a pipelined slave with readdatavalid, checked on every sample."""

    def __init__(self, log) -> None:
        self.log = log
        self.violations: list[str] = []
        self.outstanding: deque[int] = deque()  # edges at which reads were accepted
        self.prev: Sample | None = None
        self.reads = 0
        self.responses = 0

    def fail(self, s: Sample, msg: str) -> None:
        text = f"Avalon protocol violation at edge {s.edge}: {msg}"
        self.log.error(text)
        self.violations.append(text)

    def observe(self, s: Sample) -> None:
        for name in ("waitrequest", "readdatavalid", "irq", "tap"):
            if getattr(s, name) is None:
                self.fail(s, f"{name} is X/Z")
        # (reset is synchronous: the slave is in reset from the first edge that samples it)
        if not s.rst_n and self.prev is not None and not self.prev.rst_n and s.waitrequest != 1:
            self.fail(s, "waitrequest low while the slave is in reset")
        if s.readdatavalid:
            if s.waitrequest:
                self.fail(s, "readdatavalid (a response) while waitrequest is high")
            if not self.outstanding:
                self.fail(s, "readdatavalid with no read outstanding (read data without a read)")
            else:
                self.outstanding.popleft()
                self.responses += 1
            if s.readdata is None:
                self.fail(s, "readdata is X/Z while readdatavalid is high")
        p = self.prev
        if p is not None and p.rst_n and s.rst_n and (p.read or p.write) and p.waitrequest:
            held = (p.read, p.write, p.address, p.writedata if p.write else None)
            if (s.read, s.write, s.address, s.writedata if s.write else None) != held:
                self.fail(s, "the master changed a transfer that waitrequest was holding")
        if s.read and s.write:
            self.fail(s, "read and write asserted together")
        if s.accepted and s.read:
            self.outstanding.append(s.edge)
            self.reads += 1
            if len(self.outstanding) > MAX_PENDING_READS:
                self.fail(s, f"{len(self.outstanding)} reads in flight, the slave declares at most "
                             f"{MAX_PENDING_READS} (maximumPendingReadTransactions)")
        if self.outstanding and s.edge - self.outstanding[0] > MAX_READ_WAIT:
            self.fail(s, f"read accepted at edge {self.outstanding[0]} got no readdatavalid "
                         f"within {MAX_READ_WAIT} cycles")
            self.outstanding.popleft()
        if not s.rst_n:
            self.outstanding.clear()  # the interconnect is reset with the slave
        self.prev = s

    def finish(self, s: Sample | None) -> None:
        if self.outstanding and s is not None:
            self.fail(s,
                      f"reads accepted at edges {list(self.outstanding)} never got readdatavalid")
            self.outstanding.clear()


class Model:
    """The echoer as registers.yaml and fpga/README.md describe it, one rising edge at a time.

    After edge(s), irq/valid/rdata/waitrequest are the outputs the DUT must show in the
    next sample."""

    def __init__(self) -> None:
        self.reset()
        self.synced = False

    def reset(self) -> None:
        self.value = self.counter = self.cycles_hi = 0
        self.t_write = self.t_clear = self.width = self.events = 0
        self.irq = False
        self.ready = False
        self.valid = False
        self.rdata = 0

    def read(self, addr: int, now: int) -> int:
        if addr == REG["RECV"]:
            if self.irq:
                self.irq = False
                self.t_clear = now
                self.width = (now - self.t_write) & M32
            return self.value
        if addr == REG["STATUS"]:
            return STATUS_IRQ_MASK if self.irq else 0
        if addr == REG["CYCLES_LO"]:
            self.cycles_hi = self.counter >> 32
            return now
        return {
            REG["VERSION"]: VERSION,
            REG["CLOCK_HZ"]: CLOCK_HZ,
            REG["CYCLES_HI"]: self.cycles_hi,
            REG["T_WRITE"]: self.t_write,
            REG["T_CLEAR"]: self.t_clear,
            REG["WIDTH"]: self.width,
            REG["EVENTS"]: self.events,
        }.get(addr, OTHER_VALUE)

    def edge(self, s: Sample) -> None:
        if not s.rst_n:
            self.reset()
            self.synced = True
            return
        now = self.counter & M32
        self.valid = False
        if self.ready and (s.read or s.write):
            if s.write:
                if s.address == REG["SEND"]:
                    self.value = s.writedata
                    self.events = (self.events + 1) & M32
                    if not self.irq:
                        self.irq = True
                        self.t_write = now
            else:
                self.valid = True
                self.rdata = self.read(s.address, now)
        self.ready = True
        self.counter = (self.counter + 1) & M64

    def compare(self, s: Sample) -> list[str]:
        """What differs between the DUT's outputs in sample s and the model's prediction."""
        want = {"waitrequest": int(not self.ready), "readdatavalid": int(self.valid),
                "irq": int(self.irq), "tap": int(self.irq)}
        if self.valid:
            want["readdata"] = self.rdata
        return [f"edge {s.edge}: {k} = {getattr(s, k)!r}, the model says {v:#x}"
                for k, v in want.items() if getattr(s, k) != v]


class Harness:
    """Clock, reset, the Avalon master, the protocol checker and (optionally) the model."""

    def __init__(self, dut, check_model: bool = False, seed: int = 0) -> None:
        self.dut = dut
        self.log = dut._log
        self.rng = random.Random(seed)
        self.checker = ProtocolChecker(self.log)
        self.model = Model() if check_model else None
        self.mismatches: list[str] = []
        self.samples: dict[int, Sample] = {}
        self.last: Sample | None = None
        self.queue: deque[Op] = deque()
        self.current: Op | None = None
        self.pending: deque[Op] = deque()
        self.reset_left = 0
        self.e0: int | None = None  # first edge with reset released: the DUT's cycle 0
        self.deposit: int | None = None
        # (rise, fall) of irqflagtap, ps after t0, as a scope sees it
        self.pulses: list[tuple[int, int]] = []
        self.t0 = 0  # simulated time of rising edge 0 (tests share one simulation)

    @classmethod
    async def start(cls, dut, **kw) -> Harness:
        tb = cls(dut, **kw)
        dut.RST_N.value = 0
        dut.avs_read.value = 0
        dut.avs_write.value = 0
        dut.avs_address.value = 0
        dut.avs_writedata.value = 0
        tb.t0 = _now_ps()
        Clock(dut.CLK, PERIOD_PS, unit="ps").start()
        tb.reset_left = 3
        cocotb.start_soon(tb._cycle_loop())
        cocotb.start_soon(tb._scope())
        await tb.wait_reset_done()
        return tb

    # --- the per-cycle engine ------------------------------------------------------

    async def _cycle_loop(self) -> None:
        dut = self.dut
        while True:
            await FallingEdge(dut.CLK)
            if self.reset_left:
                self.reset_left -= 1
                dut.RST_N.value = 0
            else:
                dut.RST_N.value = 1
            if self.current is None and self.queue:
                if self.queue[0].gap > 0:
                    self.queue[0].gap -= 1
                else:
                    self.current = self.queue.popleft()
            op = self.current
            if op is None:  # idle: junk on address and writedata, which the slave must ignore
                dut.avs_read.value = 0
                dut.avs_write.value = 0
                dut.avs_address.value = self.rng.randrange(ADDR_WORDS)
                dut.avs_writedata.value = self.rng.getrandbits(32)
            else:
                dut.avs_read.value = int(not op.write)
                dut.avs_write.value = int(op.write)
                dut.avs_address.value = op.address
                dut.avs_writedata.value = op.data if op.write else self.rng.getrandbits(32)
            if self.deposit is not None:
                dut.core_cycles.value = self.deposit
                if self.model:
                    self.model.counter = self.deposit
                self.deposit = None
            await ReadOnly()
            self._observe(self._sample())

    def _sample(self) -> Sample:
        d = self.dut
        edge = (_now_ps() - self.t0) // PERIOD_PS + 1
        return Sample(edge, _level(d.RST_N), _level(d.avs_read), _level(d.avs_write),
                      _level(d.avs_address),
                      _level(d.avs_writedata), _level(d.avs_waitrequest),
                      _level(d.avs_readdatavalid),
                      _level(d.avs_readdata), _level(d.ins_irq), _level(d.coe_irqflagtap))

    def _observe(self, s: Sample) -> None:
        self.samples[s.edge] = s
        if self.last is not None and not self.last.rst_n and s.rst_n:
            self.e0 = s.edge
        self.last = s
        self.checker.observe(s)
        if self.model:
            if self.model.synced:
                self.mismatches += self.model.compare(s)
            self.model.edge(s)
        if s.readdatavalid and self.pending:
            op = self.pending.popleft()
            op.rdata, op.responded, op.done = s.readdata, s.edge, True
        op = self.current
        if op is not None and s.accepted:
            op.accepted = s.edge
            self.current = None
            if op.write:
                op.done = True
            else:
                self.pending.append(op)
        if not s.rst_n:
            for op in self.pending:
                op.abandoned = op.done = True
            self.pending.clear()

    async def _scope(self) -> None:
        """irqflagtap's pulses in simulated time, as the oscilloscope on the GPIO pin sees them."""
        tap = self.dut.coe_irqflagtap
        while True:
            await RisingEdge(tap)
            rise = _now_ps() - self.t0
            await FallingEdge(tap)
            self.pulses.append((rise, _now_ps() - self.t0))

    # --- what tests call -----------------------------------------------------------

    def cyc(self, edge: int) -> int:
        """The DUT's cycle counter at `edge` as the simulator counts it: edges since reset."""
        return edge - self.e0

    async def wait_edges(self, n: int) -> None:
        for _ in range(n):
            await RisingEdge(self.dut.CLK)

    def issue(self, *ops: Op) -> None:
        """Queue transfers for the master; it presents them in order, each after its gap."""
        self.queue.extend(ops)

    async def run(self, *ops: Op, limit: int = 10_000) -> list[Op]:
        """Issue the transfers and wait until each is done (writes accepted, reads answered)."""
        self.issue(*ops)
        return await self.wait_done(*ops, limit=limit)

    async def wait_done(self, *ops: Op, limit: int = 10_000) -> list[Op]:
        waited = 0
        while not all(op.done for op in ops):
            await RisingEdge(self.dut.CLK)
            waited += 1
            assert waited < limit, (
                f"transfers not completed after {limit} cycles: {[o for o in ops if not o.done]}"
            )
        return list(ops)

    async def read(self, name_or_addr, gap: int = 0) -> int:
        (op,) = await self.run(rd(name_or_addr, gap))
        assert not op.abandoned
        return op.rdata

    async def write(self, name_or_addr, data: int, gap: int = 0) -> Op:
        (op,) = await self.run(wr(name_or_addr, data, gap))
        return op

    async def regs(self, *names: str) -> dict[str, int]:
        """Several registers read back to back (pipelined)."""
        ops = await self.run(*(rd(n) for n in names))
        return {n: op.rdata for n, op in zip(names, ops, strict=True)}

    async def reset(self, cycles: int = 2) -> None:
        self.reset_left = cycles
        await RisingEdge(self.dut.CLK)
        await self.wait_reset_done()

    async def wait_reset_done(self) -> None:
        while self.reset_left or self.last is None or not self.last.rst_n:
            await RisingEdge(self.dut.CLK)

    def deposit_counter(self, value: int) -> None:
        """Set the DUT's 64-bit cycle counter (its register core_cycles) at the next falling
        edge."""
        self.deposit = value & M64

    def level(self, what: str, first: int, last: int) -> list[int]:
        return [getattr(self.samples[e], what) for e in range(first, last + 1)]

    async def finish(self) -> None:
        """Drain the bus; fail the test on any protocol violation or model mismatch."""
        await self.wait_edges(MAX_READ_WAIT + 2)
        assert not self.queue and self.current is None, "transfers left unissued"
        self.checker.finish(self.last)
        assert not self.checker.violations, "\n".join(self.checker.violations[:20])
        assert not self.mismatches, "DUT differs from the register map's model:\n" + "\n".join(
            self.mismatches[:20]
        )


def check_latency(ops: list[Op]) -> None:
    """fpga/README.md: read data comes one cycle after the read is accepted."""
    for op in ops:
        if not op.write and not op.abandoned:
            assert op.responded == op.accepted + 1, (
                f"read of word {op.address:#x} accepted at edge {op.accepted} answered at edge "
                f"{op.responded}, not one cycle later")


# ======================================================================================
# Tests
# ======================================================================================


@cocotb.test()
async def reset_values_and_identity(dut):
    """waitrequest in and just after reset; every register's reset value; VERSION, CLOCK_HZ and
    OTHER_VALUE as registers.yaml says; a read presented during reset is held, not lost."""
    tb = await Harness.start(dut)
    e0 = tb.e0
    # waitrequest high in every reset cycle and in the first cycle after it, low from then on
    assert all(tb.samples[e].waitrequest == 1 for e in range(e0 - 3,
                                                             e0 + 1)), tb.level("waitrequest",
                                                                                e0 - 3, e0)
    # a read presented from the first edge of a reset on: the master holds it through reset and
    # waitrequest, and it is accepted in the first cycle waitrequest is low
    op = rd("VERSION")
    tb.reset_left = 3
    tb.issue(op)
    await tb.wait_reset_done()
    await tb.wait_done(op)
    assert op.accepted == tb.e0 + 1, (
        f"held read accepted at edge {op.accepted}, first free edge is {tb.e0 + 1}"
    )
    assert op.rdata == VERSION
    assert all(tb.samples[e].readdatavalid == 0 for e in range(tb.e0 - 3, tb.e0 + 2))

    values = await tb.regs("RECV", "STATUS", "VERSION", "CLOCK_HZ", "CYCLES_HI", "T_WRITE",
                           "T_CLEAR", "WIDTH",
                           "EVENTS")
    assert values == {"RECV": 0, "STATUS": 0, "VERSION": VERSION, "CLOCK_HZ": CLOCK_HZ,
                      "CYCLES_HI": 0,
                      "T_WRITE": 0, "T_CLEAR": 0, "WIDTH": 0, "EVENTS": 0}, values
    assert CONST["VERSION_MAJOR_TIMESTAMPS"] <= VERSION >> 16
    # SEND reads as OTHER_VALUE, and so does every offset the map does not list
    ops = await tb.run(rd("SEND"), *(rd(a) for a in UNLISTED))
    assert [o.rdata for o in ops] == [OTHER_VALUE] * len(ops), [hex(o.rdata) for o in ops]
    check_latency(ops)
    # the counter counts from reset: CYCLES_LO read at edge k returns k - e0
    ops = await tb.run(rd("CYCLES_LO"), rd("CYCLES_LO"), rd("CYCLES_LO", gap=5))
    assert [o.rdata for o in ops] == [tb.cyc(o.accepted) for o in ops]
    assert await tb.read("CYCLES_HI") == 0
    assert not any(tb.level("irq", tb.e0, tb.last.edge)), "irq rose without a SEND"
    await tb.finish()


@cocotb.test()
async def event_cycle_exact(dut):
    """One event as the seed's PCIe module makes it: SEND raises ins_irq and irqflagtap one cycle
    later; the clearing RECV returns the value and drops both; every timestamp is the
    simulator's own cycle count; WIDTH is the pulse the scope sees."""
    tb = await Harness.start(dut)
    await tb.wait_edges(7)
    value = 0xC0FFEE42
    send = await tb.write("SEND", value)
    w = send.accepted
    await tb.wait_edges(20)  # the interrupt latency
    recv = rd("RECV")
    await tb.run(recv)
    c = recv.accepted
    await tb.wait_edges(3)

    assert tb.samples[w].irq == 0 and tb.samples[w].tap == 0, (
        "irq high before the SEND was accepted"
    )
    assert tb.level("irq", w + 1, c) == [1] * (c - w), f"irq not high from edge {w + 1} through {c}"
    assert tb.level("tap", w + 1,
                    c) == [1] * (c - w), f"irqflagtap not high from edge {w + 1} through {c}"
    assert tb.samples[c + 1].irq == 0 and tb.samples[c + 1].tap == 0, (
        "the clearing read did not drop irq/irqflagtap"
    )
    assert tb.level("tap", c + 1, c + 3) == [0, 0, 0]
    assert recv.rdata == value, f"RECV returned {recv.rdata:#x}, SEND wrote {value:#x}"
    assert recv.responded == c + 1 and tb.samples[c + 1].readdatavalid == 1
    assert [tb.samples[e].readdatavalid for e in (c, c + 2)] == [0, 0], (
        "readdatavalid is not a one-cycle pulse"
    )

    regs = await tb.regs("T_WRITE", "T_CLEAR", "WIDTH", "EVENTS", "STATUS")
    assert regs["T_WRITE"] == tb.cyc(w), (
        f"T_WRITE {regs['T_WRITE']} != cycle {tb.cyc(w)} of the SEND"
    )
    assert regs["T_CLEAR"] == tb.cyc(c), (
        f"T_CLEAR {regs['T_CLEAR']} != cycle {tb.cyc(c)} of the RECV"
    )
    assert regs["WIDTH"] == c - w, f"WIDTH {regs['WIDTH']} != {c - w} cycles between SEND and RECV"
    assert regs["EVENTS"] == 1 and regs["STATUS"] == 0, regs
    # the scope's view: one pulse, exactly WIDTH clock periods long in simulated time
    assert len(tb.pulses) == 1, tb.pulses
    rise, fall = tb.pulses[0]
    assert fall - rise == regs["WIDTH"] * PERIOD_PS, (rise, fall, regs["WIDTH"])
    assert rise == w * PERIOD_PS and fall == c * PERIOD_PS, (
        "irqflagtap does not switch at the accepting edges"
    )

    # RECV with nothing pending: the stored value, nothing else changes
    before = await tb.regs("T_CLEAR", "WIDTH", "EVENTS")
    again = await tb.read("RECV", gap=4)
    assert again == value
    assert await tb.regs("T_CLEAR", "WIDTH", "EVENTS") == before
    assert len(tb.pulses) == 1 and not tb.samples[tb.last.edge].irq
    await tb.finish()


@cocotb.test()
async def status_read_does_not_clear(dut):
    """The inb variant: the handler reads STATUS first ("is it ours?"), then RECV. STATUS reports
    the IRQ without clearing it, however often it is read; the pulse lasts until RECV."""
    tb = await Harness.start(dut)
    send = await tb.write("SEND", 0x1234)
    statuses = await tb.run(rd("STATUS", gap=3), rd("STATUS"), rd("STATUS", gap=2), rd("STATUS"))
    assert [o.rdata for o in statuses] == [STATUS_IRQ_MASK] * 4, [o.rdata for o in statuses]
    last = statuses[-1].accepted
    assert tb.level("irq", send.accepted + 1,
                    last + 1) == [1] * (last + 1 - send.accepted), "STATUS cleared the IRQ"
    assert not tb.pulses, "irqflagtap fell on a STATUS read"
    (recv,) = await tb.run(rd("RECV", gap=1))
    assert recv.rdata == 0x1234
    await tb.wait_edges(2)
    assert tb.samples[recv.accepted + 1].irq == 0
    regs = await tb.regs("STATUS", "WIDTH", "T_WRITE", "T_CLEAR")
    assert regs["STATUS"] == 0
    assert regs["WIDTH"] == recv.accepted - send.accepted
    assert (regs["T_WRITE"], regs["T_CLEAR"]) == (tb.cyc(send.accepted), tb.cyc(recv.accepted))
    assert tb.pulses == [(send.accepted * PERIOD_PS, recv.accepted * PERIOD_PS)]
    check_latency(statuses)
    await tb.finish()


@cocotb.test()
async def back_to_back_and_pipelined(dut):
    """Transfers on consecutive cycles: SEND after SEND (IRQ stays high, T_WRITE keeps the first,
    EVENTS counts both), reads pipelined two deep, a one-cycle pulse, a SEND right after the
    clearing read."""
    tb = await Harness.start(dut)
    ops = await tb.run(wr("SEND", 1), wr("SEND", 2), wr("SEND", 3), rd("STATUS"), rd("EVENTS"),
                       rd("T_WRITE"),
                       rd("RECV"), rd("T_CLEAR"), rd("WIDTH"), rd("STATUS"), rd("EVENTS"))
    edges = [o.accepted for o in ops]
    assert edges == list(range(edges[0],
                               edges[0] + len(ops))), f"slave stalled a back-to-back burst: {edges}"
    check_latency(ops)
    w, c = ops[0].accepted, ops[6].accepted
    got = [o.rdata for o in ops[3:]]
    assert got == [STATUS_IRQ_MASK, 3, tb.cyc(w), 3, tb.cyc(c), c - w, 0, 3], got
    assert tb.level("irq", w + 1, c) == [1] * (c - w)
    assert tb.samples[c + 1].irq == 0
    # readdatavalid on every one of the eight consecutive response cycles, two reads in flight each
    # time
    assert tb.level("readdatavalid", ops[3].accepted + 1, ops[-1].accepted + 1) == [1] * 8

    # one-cycle pulse: RECV on the edge after SEND, then a new SEND on the very next edge
    ops = await tb.run(wr("SEND", 0xA), rd("RECV"), wr("SEND", 0xB), rd("T_WRITE"), rd("WIDTH"),
                       rd("RECV", gap=3),
                       rd("WIDTH"), rd("EVENTS"), rd("T_CLEAR"))
    w1, c1, w2, c2 = (ops[i].accepted for i in (0, 1, 2, 5))
    assert (c1, w2) == (w1 + 1, w1 + 2)
    assert ops[1].rdata == 0xA and ops[5].rdata == 0xB
    assert ops[3].rdata == tb.cyc(w2), "T_WRITE of the second pulse"
    assert ops[4].rdata == 1, f"one-cycle pulse: WIDTH {ops[4].rdata}"
    assert ops[6].rdata == c2 - w2 and ops[7].rdata == 5 and ops[8].rdata == tb.cyc(c2)
    assert tb.level("tap", w1, c2 + 1) == [0, 1, 0] + [1] * (c2 - w2) + [0]
    assert tb.pulses[-2:] == [(w1 * PERIOD_PS, c1 * PERIOD_PS), (w2 * PERIOD_PS, c2 * PERIOD_PS)]
    check_latency(ops)
    await tb.finish()


@cocotb.test()
async def ignored_writes(dut):
    """Writes to every offset but SEND change nothing: no IRQ, no event, no register."""
    tb = await Harness.start(dut)
    await tb.write("SEND", 0x55)
    (recv,) = await tb.run(rd("RECV", gap=2))
    names = ["RECV", "STATUS", "VERSION", "CLOCK_HZ", "CYCLES_HI", "T_WRITE", "T_CLEAR", "WIDTH",
             "EVENTS"]
    before = await tb.regs(*names)
    ops = await tb.run(*(wr(a, 0xFFFFFFFF - a, gap=a % 2) for a in range(1, ADDR_WORDS)))
    after = await tb.regs(*names)
    assert after == before, (before, after)
    first = ops[0].accepted
    assert not any(tb.level("irq", first, tb.last.edge)), "a write to another offset raised the IRQ"
    assert len(tb.pulses) == 1
    await tb.finish()


@cocotb.test()
async def reset_mid_operation(dut):
    """Reset with an IRQ pending and a read in flight: the IRQ drops, every register returns to
    its reset value, the counter restarts, and the slave works again after waitrequest."""
    tb = await Harness.start(dut)
    await tb.write("SEND", 0xDEAD)
    await tb.wait_edges(10)
    status = rd("STATUS")
    tb.issue(status)
    while status.accepted is None:
        await RisingEdge(dut.CLK)
    tb.reset_left = 4  # reset from the next falling edge, with the STATUS answer in flight
    # presented from the first reset edge on: held until waitrequest falls
    held = wr("SEND", 0xBEEF)
    tb.issue(held)
    await tb.wait_reset_done()
    r = tb.e0 - 4  # first edge that sampled reset
    assert tb.samples[r].readdatavalid == 1 and tb.samples[r].readdata == STATUS_IRQ_MASK
    assert tb.samples[r].irq == 1 and tb.samples[r + 1].irq == 0, (
        "reset did not clear the IRQ at its first edge"
    )
    assert tb.level("waitrequest", r + 1, tb.e0) == [1] * 4
    await tb.wait_done(held)
    await tb.wait_edges(1)
    assert held.accepted == tb.e0 + 1, (
        f"the SEND held over reset was accepted at {held.accepted}, not {tb.e0 + 1}"
    )
    assert tb.samples[held.accepted].irq == 0 and tb.samples[held.accepted + 1].irq == 1
    regs = await tb.regs("RECV", "T_WRITE", "T_CLEAR", "WIDTH", "EVENTS", "CYCLES_LO", "CYCLES_HI")
    assert regs["RECV"] == 0xBEEF
    assert regs["T_WRITE"] == tb.cyc(held.accepted) == 1, "counter did not restart at reset"
    assert regs["EVENTS"] == 1, "EVENTS not cleared by reset"
    assert regs["WIDTH"] == regs["T_CLEAR"] - regs["T_WRITE"]
    assert regs["CYCLES_HI"] == 0
    assert len(tb.pulses) == 2 and tb.pulses[0][1] == r * PERIOD_PS

    # a reset with only the counter running: every register back to 0
    await tb.wait_edges(5)
    await tb.reset(cycles=1)
    regs = await tb.regs("RECV", "STATUS", "T_WRITE", "T_CLEAR", "WIDTH", "EVENTS", "CYCLES_HI",
                         "VERSION", "CLOCK_HZ")
    assert regs == {"RECV": 0, "STATUS": 0, "T_WRITE": 0, "T_CLEAR": 0, "WIDTH": 0, "EVENTS": 0,
                    "CYCLES_HI": 0,
                    "VERSION": VERSION, "CLOCK_HZ": CLOCK_HZ}, regs
    await tb.finish()


@cocotb.test()
async def timestamps_across_counter_wrap(dut):
    """A pulse across the 32-bit wrap of the counter still measures its width; CYCLES_LO then
    CYCLES_HI read a consistent 64-bit value on both sides of the carry."""
    tb = await Harness.start(dut)
    start = (3 << 32) | (M32 - 9)  # 10 cycles before the low word wraps
    tb.deposit_counter(start)
    await RisingEdge(dut.CLK)
    base = tb.last.edge  # the counter holds `start` in the cycle ending at this edge
    lo1 = rd("CYCLES_LO")
    send = wr("SEND", 7)
    await tb.run(lo1, rd("CYCLES_HI"), send)
    hi1 = await tb.read("CYCLES_HI")
    recv = rd("RECV", gap=12)
    await tb.run(recv)
    lo2 = rd("CYCLES_LO")
    await tb.run(lo2)
    hi2 = await tb.read("CYCLES_HI")

    def counter(edge):
        return (start + edge - base) & M64

    assert lo1.rdata == counter(lo1.accepted) & M32 and hi1 == counter(lo1.accepted) >> 32 == 3
    assert lo2.rdata == counter(lo2.accepted) & M32 and hi2 == counter(lo2.accepted) >> 32 == 4
    regs = await tb.regs("T_WRITE", "T_CLEAR", "WIDTH")
    assert regs["T_WRITE"] == counter(send.accepted) & M32 and regs["T_WRITE"] > M32 - 10
    assert regs["T_CLEAR"] == counter(recv.accepted) & M32 and regs["T_CLEAR"] < 10
    assert regs["WIDTH"] == recv.accepted - send.accepted, regs
    await tb.finish()


@cocotb.test()
async def random_traffic_against_model(dut):
    """Thousands of random transfers, back to back and spaced, with occasional resets: every
    output in every cycle against the register map's cycle model, under the protocol checker."""
    seed = cocotb.RANDOM_SEED
    rng = random.Random(seed)
    tb = await Harness.start(dut, check_model=True, seed=seed)
    weights = {REG["SEND"]: 6, REG["RECV"]: 6, REG["STATUS"]: 3}
    addrs = list(range(ADDR_WORDS))
    n = int(os.environ.get("ECHOER_RANDOM_OPS", "10000"))
    done = resets = 0
    while done < n:
        batch = []
        for _ in range(rng.randint(1, 40)):
            addr = rng.choices(addrs, [weights.get(a, 1) for a in addrs])[0]
            gap = rng.choice([0, 0, 0, 0, 1, 2, 5])
            write_share = 0.55 if addr == REG["SEND"] else 0.1
            if rng.random() < write_share:
                batch.append(wr(addr, rng.getrandbits(32), gap))
            else:
                batch.append(rd(addr, gap))
        if rng.random() < 0.05:  # a reset lands somewhere inside this batch
            tb.issue(*batch)
            await tb.wait_edges(rng.randint(1, 20))
            tb.reset_left = rng.randint(1, 3)
            resets += 1
            await tb.wait_reset_done()
            await tb.wait_done(*batch, limit=2000)
        else:
            await tb.run(*batch, limit=2000)
            check_latency(batch)
        done += len(batch)
        if tb.mismatches or tb.checker.violations:
            break
    tb.log.info("random traffic: %d transfers, %d reads, %d pulses, %d resets", done,
                tb.checker.reads,
                len(tb.pulses), resets)
    await tb.finish()
