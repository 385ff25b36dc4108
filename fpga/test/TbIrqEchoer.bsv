// Bluesim testbench for the IRQ echoer: drives the Avalon-MM pins cycle by cycle and
// checks every behaviour of fpga/registers.yaml and the timing promised in
// fpga/README.md. Prints "FAIL: ..." per failed check and ends with one line,
// "TB PASS" or "TB FAIL", which fpga/Makefile turns into the exit status.
// Every accepted transfer is also printed as a "TRACE" line (DUT, R/W, counter value,
// word address, data) so tests/test_register_map.py can replay it through the Python
// model of the twin and require the same read data.
package TbIrqEchoer;

import Clocks::*;
import StmtFSM::*;
import AvalonMMSlave::*;
import EchoerRegs::*;
import IrqEchoer::*;

// One Avalon master per DUT: a read or a write for exactly the cycle the method is
// called; the pins are idle otherwise. `now` is the DUT's cycle counter, for the trace.
interface AvalonDriver;
   method Action read(EchoerAddr a);
   method Action write(EchoerAddr a, EchoerData d);
   method Bool readsMatchValids;   // every read got exactly one readdatavalid
endinterface

module mkAvalonDriver#(IrqEchoer dut, String tag, ReadOnly#(Bit#(64)) now)(AvalonDriver);
   Wire#(Bool)       rdW   <- mkDWire(False);
   Wire#(Bool)       wrW   <- mkDWire(False);
   Wire#(EchoerAddr) addrW <- mkDWire(0);
   Wire#(EchoerData) dataW <- mkDWire(0);
   Reg#(UInt#(32))   reads  <- mkReg(0);
   Reg#(UInt#(32))   valids <- mkReg(0);
   // The read in flight: with latency 1 there is at most one whose data is due.
   Reg#(EchoerAddr)  lastAddr  <- mkReg(0);
   Reg#(Bit#(64))    lastCycle <- mkReg(0);

   // The pins are always_enabled: drive them every cycle.
   (* fire_when_enabled, no_implicit_conditions *)
   rule drive;
      dut.avs.bus(addrW, rdW, wrW, dataW);
      if (!dut.avs.waitrequest && wrW)
         $display("TRACE %s W %0d %0d %0d", tag, now, addrW, dataW);
      if (!dut.avs.waitrequest && rdW) begin
         lastAddr <= addrW;
         lastCycle <= now;
      end
   endrule

   rule count_valid (dut.avs.readdatavalid);
      valids <= valids + 1;
      $display("TRACE %s R %0d %0d %0d", tag, lastCycle, lastAddr, dut.avs.readdata);
   endrule

   method Action read(EchoerAddr a);
      rdW <= True;
      addrW <= a;
      reads <= reads + 1;
   endmethod

   method Action write(EchoerAddr a, EchoerData d);
      wrW <= True;
      addrW <= a;
      dataW <= d;
   endmethod

   method Bool readsMatchValids = reads == valids;
endmodule

(* synthesize *)
module mkTbIrqEchoer(Empty);
   EchoerData clockHz = fromInteger(echoerClockHzDefault);
   // The wrap DUT's counter starts 16 cycles before the 32-bit timestamps wrap.
   Bit#(64) wrapInit = 'hFFFFFFF0;

   Clock clk <- exposeCurrentClock;
   // A reset the testbench can assert mid-run; it is also asserted at start-up.
   MakeResetIfc dutRst <- mkReset(0, True, clk);

   IrqEchoer dut  <- mkIrqEchoer(clockHz, reset_by dutRst.new_rst);
   IrqEchoer dutW <- mkIrqEchoerCore(clockHz, wrapInit);

   // The testbench's own cycle counts. `cycle` shares the DUT's reset, so it must equal
   // the DUT's counter in every cycle; `wall` is never reset mid-run.
   Reg#(Bit#(64)) cycle <- mkReg(0, reset_by dutRst.new_rst);
   Reg#(Bit#(64)) wall  <- mkReg(0);

   ReadOnly#(Bit#(64)) dutCycle = regToReadOnly(cycle);
   ReadOnly#(Bit#(64)) dutWCycle = interface ReadOnly;
                                      method Bit#(64) _read = wrapInit + wall;
                                   endinterface;
   AvalonDriver drv  <- mkAvalonDriver(dut, "main", dutCycle);
   AvalonDriver drvW <- mkAvalonDriver(dutW, "wrap", dutWCycle);

   Reg#(Bit#(64)) readAt  <- mkReg(0);   // cycle (wall for dutW) a read was accepted
   Reg#(Bit#(64)) wMark   <- mkReg(0);   // cycle of the SEND that raised the IRQ
   Reg#(Bit#(64)) cMark   <- mkReg(0);   // cycle of the clearing RECV
   Reg#(Bit#(32)) tapHigh  <- mkReg(0);  // cycles irqflagtap was high (dut)
   Reg#(Bit#(32)) tapHighW <- mkReg(0);  // same for dutW
   Reg#(Bit#(32)) tapMark  <- mkReg(0);
   Reg#(UInt#(32)) failures    <- mkReg(0);
   Reg#(UInt#(32)) monFailures <- mkReg(0);

   (* fire_when_enabled, no_implicit_conditions *)
   rule count_cycles;
      cycle <= cycle + 1;
   endrule

   (* fire_when_enabled, no_implicit_conditions *)
   rule monitor;
      wall <= wall + 1;
      if (dut.irqflagtap) tapHigh <= tapHigh + 1;
      if (dutW.irqflagtap) tapHighW <= tapHighW + 1;
      // Slaves hold waitrequest while leaving reset (first cycle after it).
      Bool waitBad = wall == 0 && !(dut.avs.waitrequest && dutW.avs.waitrequest);
      Bool tapBad = dut.irq != dut.irqflagtap || dutW.irq != dutW.irqflagtap;
      if (waitBad)
         $display("FAIL: waitrequest low in the first cycle after reset");
      if (tapBad)
         $display("FAIL: irq and irqflagtap differ (wall cycle %0d)", wall);
      if (waitBad || tapBad)
         monFailures <= monFailures + 1;
      if (wall > 20000) begin
         $display("TB FAIL: timeout, the test sequence did not finish");
         $finish(0);
      end
   endrule

   function Action report(String what, EchoerData got, EchoerData want);
      return action
         $display("FAIL: %s: got 0x%08h, expected 0x%08h (wall cycle %0d)",
                  what, got, want, wall);
         failures <= failures + 1;
      endaction;
   endfunction

   function Action check(Bool ok, String what);
      return action
         if (!ok) begin
            $display("FAIL: %s (wall cycle %0d)", what, wall);
            failures <= failures + 1;
         end
      endaction;
   endfunction

   // Read register a and expect `want` with readdatavalid exactly one cycle later.
   // `want` is evaluated in that later cycle, so it may use readAt.
   function Stmt expectRead(AvalonDriver d, IrqEchoer e, Bool wallClock, EchoerAddr a,
                            EchoerData want, String what);
      return seq
         action
            d.read(a);
            readAt <= wallClock ? wall : cycle;
         endaction
         action
            if (!e.avs.readdatavalid)
               report(strConcat(what, ": readdatavalid one cycle after the read"), 0, 1);
            else if (e.avs.readdata != want)
               report(what, e.avs.readdata, want);
         endaction
      endseq;
   endfunction

   function Stmt rd(EchoerAddr a, EchoerData want, String what);
      return expectRead(drv, dut, False, a, want, what);
   endfunction
   function Stmt rdW(EchoerAddr a, EchoerData want, String what);
      return expectRead(drvW, dutW, True, a, want, what);
   endfunction

   // 32-bit timestamps across the counter wrap, on the DUT whose counter starts near it.
   Stmt wrapTest = seq
      await(!dutW.avs.waitrequest);
      action
         drvW.write(echoerRegSend, 'h600DF00D);
         wMark <= wall;
         tapMark <= tapHighW;
      endaction
      action
         check(dutW.irqflagtap, "wrap: irqflagtap high one cycle after SEND");
      endaction
      repeat (24) noAction;
      action
         drvW.read(echoerRegRecv);
         cMark <= wall;
      endaction
      action
         if (!dutW.avs.readdatavalid || dutW.avs.readdata != 'h600DF00D)
            report("wrap: RECV value", dutW.avs.readdata, 'h600DF00D);
         else
            check(!dutW.irqflagtap, "wrap: irqflagtap low one cycle after RECV");
      endaction
      rdW(echoerRegTWrite, truncate(wrapInit + wMark), "wrap: T_WRITE before the wrap");
      rdW(echoerRegTClear, truncate(wrapInit + cMark), "wrap: T_CLEAR after the wrap");
      rdW(echoerRegWidth, truncate(cMark - wMark), "wrap: WIDTH across the wrap");
      action
         check(tapHighW - tapMark == truncate(cMark - wMark),
               "wrap: irqflagtap high for WIDTH cycles");
      endaction
      rdW(echoerRegCyclesLo, truncate(wrapInit + readAt), "wrap: CYCLES_LO");
      rdW(echoerRegCyclesHi, 1, "wrap: CYCLES_HI carried into the high word");
      $display("TB: counter wrap checked");
   endseq;

   Stmt mainTest = seq
      // Reset state (waitrequest right after reset is checked by the monitor rule).
      await(!dut.avs.waitrequest);
      rd(echoerRegStatus, 0, "reset: STATUS");
      rd(echoerRegRecv, 0, "reset: RECV");
      rd(echoerRegVersion, echoerVersion, "VERSION");
      rd(echoerRegClockHz, clockHz, "CLOCK_HZ");
      rd(echoerRegTWrite, 0, "reset: T_WRITE");
      rd(echoerRegTClear, 0, "reset: T_CLEAR");
      rd(echoerRegWidth, 0, "reset: WIDTH");
      rd(echoerRegEvents, 0, "reset: EVENTS");
      rd(echoerRegCyclesLo, truncate(readAt), "CYCLES_LO equals the testbench cycle");
      rd(echoerRegCyclesHi, 0, "CYCLES_HI latched by the CYCLES_LO read");
      // Anything that is not a readable register returns the constant.
      rd(echoerRegSend, echoerOtherValue, "read of SEND");
      rd('hB, echoerOtherValue, "read of unused offset 0x2C");
      rd('hF, echoerOtherValue, "read of unused offset 0x3C");
      $display("TB: reset state, version and constant checked");

      // One event: SEND raises the IRQ one cycle later, RECV returns and clears.
      action
         drv.write(echoerRegSend, 'h12345678);
         wMark <= cycle;
         tapMark <= tapHigh;
      endaction
      action
         check(dut.irq && dut.irqflagtap, "IRQ and irqflagtap high one cycle after SEND");
      endaction
      rd(echoerRegStatus, 1, "STATUS shows the pending IRQ");
      rd(echoerRegStatus, 1, "STATUS again: reading it has no side effect");
      rd(echoerRegTWrite, truncate(wMark), "T_WRITE equals the cycle of the SEND");
      rd(echoerRegEvents, 1, "EVENTS after one SEND");
      repeat (10) noAction;
      action
         drv.read(echoerRegRecv);
         cMark <= cycle;
      endaction
      action
         if (!dut.avs.readdatavalid || dut.avs.readdata != 'h12345678)
            report("RECV returns the stored value", dut.avs.readdata, 'h12345678);
         else
            check(!dut.irq && !dut.irqflagtap, "IRQ and irqflagtap low one cycle after RECV");
      endaction
      rd(echoerRegTClear, truncate(cMark), "T_CLEAR equals the cycle of the RECV");
      rd(echoerRegWidth, truncate(cMark - wMark), "WIDTH = T_CLEAR - T_WRITE");
      action
         check(tapHigh - tapMark == truncate(cMark - wMark),
               "irqflagtap was high for exactly WIDTH cycles");
      endaction
      rd(echoerRegStatus, 0, "STATUS after RECV");

      // RECV with no IRQ pending: the value again, timestamps untouched.
      rd(echoerRegRecv, 'h12345678, "RECV with none pending returns the stored value");
      rd(echoerRegTClear, truncate(cMark), "RECV with none pending keeps T_CLEAR");
      rd(echoerRegWidth, truncate(cMark - wMark), "RECV with none pending keeps WIDTH");

      // Writes to anything but SEND are ignored.
      action drv.write(echoerRegVersion, 0); endaction
      action drv.write(echoerRegWidth, 'hFFFF); endaction
      action drv.write(echoerRegRecv, 'h1); endaction
      action drv.write('hF, 'h1); endaction
      action check(!dut.irq, "writes to other offsets raise no IRQ"); endaction
      rd(echoerRegVersion, echoerVersion, "VERSION after a write to it");
      rd(echoerRegWidth, truncate(cMark - wMark), "WIDTH after a write to it");
      rd(echoerRegRecv, 'h12345678, "RECV after a write to it");
      rd(echoerRegEvents, 1, "EVENTS count only SEND writes");
      $display("TB: single event, status, no-pending RECV and ignored writes checked");

      // Back-to-back SENDs in consecutive cycles: the later value wins, the IRQ stays
      // high, T_WRITE keeps the first (the rising edge), EVENTS counts both.
      action
         drv.write(echoerRegSend, 'hAAAA0001);
         wMark <= cycle;
         tapMark <= tapHigh;
      endaction
      action
         drv.write(echoerRegSend, 'hBBBB0002);
         check(dut.irq, "IRQ high one cycle after the first of two SENDs");
      endaction
      action check(dut.irq, "IRQ still high after the second SEND"); endaction
      rd(echoerRegTWrite, truncate(wMark), "back-to-back: T_WRITE is the first SEND");
      rd(echoerRegEvents, 3, "back-to-back: EVENTS counts both SENDs");
      action
         drv.read(echoerRegRecv);
         cMark <= cycle;
      endaction
      action
         if (!dut.avs.readdatavalid || dut.avs.readdata != 'hBBBB0002)
            report("back-to-back: RECV returns the later value", dut.avs.readdata,
                   'hBBBB0002);
         else
            check(!dut.irq, "back-to-back: one RECV clears the IRQ");
      endaction
      rd(echoerRegWidth, truncate(cMark - wMark), "back-to-back: WIDTH from the first SEND");
      action
         check(tapHigh - tapMark == truncate(cMark - wMark),
               "back-to-back: irqflagtap high for WIDTH cycles");
      endaction

      // Pipelined reads in consecutive cycles, and a SEND right after a clearing RECV.
      action drv.read(echoerRegVersion); endaction
      action
         drv.read(echoerRegClockHz);
         if (!dut.avs.readdatavalid || dut.avs.readdata != echoerVersion)
            report("pipelined read 1 (VERSION)", dut.avs.readdata, echoerVersion);
      endaction
      action
         drv.write(echoerRegSend, 'h5);
         if (!dut.avs.readdatavalid || dut.avs.readdata != clockHz)
            report("pipelined read 2 (CLOCK_HZ)", dut.avs.readdata, clockHz);
      endaction
      action drv.read(echoerRegRecv); endaction
      action
         drv.write(echoerRegSend, 'h6);
         check(dut.avs.readdatavalid && dut.avs.readdata == 'h5, "RECV right after SEND");
      endaction
      action check(dut.irq, "SEND right after a clearing RECV raises the IRQ again"); endaction
      rd(echoerRegWidth, 1, "WIDTH of a one-cycle pulse");
      rd(echoerRegRecv, 'h6, "RECV of the second pulse");
      $display("TB: back-to-back SENDs and pipelined reads checked");

      // Reset in the middle of a pending event.
      action drv.write(echoerRegSend, 'hDEAD0003); endaction
      action
         dutRst.assertReset;
         $display("TRACE main RESET");
      endaction
      action dutRst.assertReset; endaction
      action
         check(dut.avs.waitrequest && !dut.irq, "waitrequest high and IRQ low in reset");
      endaction
      await(!dut.avs.waitrequest);
      rd(echoerRegStatus, 0, "after reset: STATUS");
      rd(echoerRegRecv, 0, "after reset: RECV");
      rd(echoerRegEvents, 0, "after reset: EVENTS");
      rd(echoerRegTWrite, 0, "after reset: T_WRITE");
      rd(echoerRegTClear, 0, "after reset: T_CLEAR");
      rd(echoerRegWidth, 0, "after reset: WIDTH");
      rd(echoerRegCyclesLo, truncate(readAt), "after reset: counter restarted with the reset");
      action check(cycle < 100, "after reset: testbench cycle restarted"); endaction
      $display("TB: reset checked");
   endseq;

   mkAutoFSM(seq
      wrapTest;
      mainTest;
      action
         check(drv.readsMatchValids && drvW.readsMatchValids,
               "one readdatavalid per read, none spurious");
      endaction
      action
         if (failures == 0 && monFailures == 0)
            $display("TB PASS: all echoer checks passed (%0d wall cycles)", wall);
         else
            $display("TB FAIL: %0d failed checks", failures + monFailures);
         $finish(0);
      endaction
   endseq);
endmodule

endpackage
