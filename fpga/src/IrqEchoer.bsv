// IrqEchoer: the irq-station PCIe IRQ echoer (bar0 of the DE4 Qsys design).
//
// The 2015 behaviour: a write to SEND stores the value and raises the IRQ; a read of
// RECV returns the value and clears the IRQ in the same operation, so the handler
// checks "is it ours" and acknowledges with one bus read. The IRQ flag also leaves the
// design as the irqflagtap conduit for a GPIO pin and the oscilloscope.
//
// Beyond the seed: a free-running 64-bit cycle counter and per-event timestamps, so the
// board measures every pulse width itself (WIDTH = cycles irqflagtap was high), plus
// VERSION and CLOCK_HZ so drivers can tell which design they talk to. The register map
// lives in fpga/registers.yaml; EchoerRegs is generated from it.
//
// Timing, in cycles of the design clock (see fpga/README.md):
//   SEND accepted in cycle W  -> irq and irqflagtap high from cycle W+1; T_WRITE = W
//   RECV accepted in cycle C  -> irq and irqflagtap low from cycle C+1;  T_CLEAR = C
//   so the tap is high for cycles W+1 .. C, exactly WIDTH = C - W cycles.
//   Reads return data in cycle N+1 for a read accepted in cycle N.
package IrqEchoer;

import AvalonMMSlave::*;
import EchoerRegs::*;

export IrqEchoer(..);
export mkIrqEchoer;
export mkIrqEchoerCore;

interface IrqEchoer;
   (* prefix = "avs" *)
   interface AvalonSlavePins#(EchoerAddrWidth, EchoerDataWidth) avs;
   // Level-sensitive interrupt for the Qsys interrupt sender (to the PCIe core's RXM IRQ).
   (* always_ready, result = "ins_irq" *)
   method Bool irq;
   // The same flag, for a GPIO pin and the scope.
   (* always_ready, result = "coe_irqflagtap" *)
   method Bool irqflagtap;
endinterface

// The echoer with its counter starting at cycleInit after reset: the testbench starts
// it near 2^32 to exercise the wrap of the 32-bit timestamps, hardware uses 0.
module mkIrqEchoerCore#(Bit#(32) clockHz, Bit#(64) cycleInit)(IrqEchoer);
   Reg#(Bool)       irqFlag  <- mkReg(False);
   Reg#(EchoerData) value    <- mkReg(0);
   Reg#(Bit#(64))   cycles   <- mkReg(cycleInit);
   Reg#(EchoerData) cyclesHi <- mkReg(0);   // high word latched by a CYCLES_LO read
   Reg#(EchoerData) tWrite   <- mkReg(0);
   Reg#(EchoerData) tClear   <- mkReg(0);
   Reg#(EchoerData) width    <- mkReg(0);
   Reg#(EchoerData) events   <- mkReg(0);

   (* fire_when_enabled, no_implicit_conditions *)
   rule tick;
      cycles <= cycles + 1;
   endrule

   AvalonTarget#(EchoerAddrWidth, EchoerDataWidth) regs = interface AvalonTarget;
      method ActionValue#(EchoerData) access(AvalonRequest#(EchoerAddrWidth,
                                                            EchoerDataWidth) req);
         EchoerData now = truncate(cycles);
         EchoerData result = echoerOtherValue;
         if (req.write) begin
            // Writes to anything but SEND are ignored.
            if (req.address == echoerRegSend) begin
               value <= req.writedata;
               events <= events + 1;
               // Only the rising edge starts a pulse: a SEND while one is pending
               // keeps T_WRITE, so WIDTH stays the width the scope sees.
               if (!irqFlag) begin
                  irqFlag <= True;
                  tWrite <= now;
               end
            end
         end
         else if (req.address == echoerRegRecv) begin
            result = value;
            if (irqFlag) begin
               irqFlag <= False;
               tClear <= now;
               width <= now - tWrite;   // modulo 2^32, so a counter wrap is harmless
            end
         end
         else if (req.address == echoerRegStatus)
            result = zeroExtend(pack(irqFlag)) << echoerStatusIrqBit;
         else if (req.address == echoerRegVersion)
            result = echoerVersion;
         else if (req.address == echoerRegClockHz)
            result = clockHz;
         else if (req.address == echoerRegCyclesLo) begin
            result = now;
            cyclesHi <= truncateLSB(cycles);
         end
         else if (req.address == echoerRegCyclesHi)
            result = cyclesHi;
         else if (req.address == echoerRegTWrite)
            result = tWrite;
         else if (req.address == echoerRegTClear)
            result = tClear;
         else if (req.address == echoerRegWidth)
            result = width;
         else if (req.address == echoerRegEvents)
            result = events;
         return result;
      endmethod
   endinterface;

   AvalonSlavePins#(EchoerAddrWidth, EchoerDataWidth) slave <- mkAvalonSlave(regs);

   interface avs = slave;
   method Bool irq = irqFlag;
   method Bool irqflagtap = irqFlag;
endmodule

// The synthesis top: CLK and RST_N (active low) come from the Qsys clock and reset.
// clockHz is a Verilog parameter set from the _hw.tcl; it only feeds CLOCK_HZ.
(* synthesize *)
module mkIrqEchoer#(parameter Bit#(32) clockHz)(IrqEchoer);
   IrqEchoer core <- mkIrqEchoerCore(clockHz, 0);
   return core;
endmodule

endpackage
