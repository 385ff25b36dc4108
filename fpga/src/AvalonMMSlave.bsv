// AvalonMMSlave: a minimal Avalon-MM slave adapter written for irq-station.
//
// The 2015 design imported an AvalonSlave package from a private library; this one
// replaces it. It turns the raw Avalon-MM slave signals into one call per accepted
// transfer of a target's `access` method and returns read data with a fixed latency:
//
//   cycle N     address/read/write/writedata sampled; if waitrequest is low the
//               transfer is accepted and target.access runs in this cycle
//   cycle N+1   readdatavalid high with readdata (reads only)
//
// Reads are pipelined: a new transfer may be accepted every cycle, so at most two
// reads are outstanding (maximumPendingReadTransactions in the _hw.tcl). waitrequest is
// high only while the slave is in reset and in the first cycle after it, as the Avalon
// spec asks of slaves during reset; after that the slave never stalls.
// There is no byteenable: every access is a full 32-bit word.
package AvalonMMSlave;

export AvalonRequest(..);
export AvalonTarget(..);
export AvalonSlavePins(..);
export mkAvalonSlave;

typedef struct {
   Bool     write;      // False: read
   Bit#(aw) address;    // word address
   Bit#(dw) writedata;  // meaningful for writes only
} AvalonRequest#(numeric type aw, numeric type dw) deriving (Bits, Eq, FShow);

// What the adapter drives: one accepted transfer per call, answered in the same cycle
// (the returned value is ignored for writes). It must have no implicit condition.
interface AvalonTarget#(numeric type aw, numeric type dw);
   method ActionValue#(Bit#(dw)) access(AvalonRequest#(aw, dw) req);
endinterface

// The Avalon-MM slave signals; port names follow the Avalon role names so the
// _hw.tcl maps them one to one (with the prefix given by the enclosing interface).
interface AvalonSlavePins#(numeric type aw, numeric type dw);
   (* always_ready, always_enabled, prefix = "" *)
   method Action bus((* port = "address" *)   Bit#(aw) address,
                     (* port = "read" *)      Bool     rd,
                     (* port = "write" *)     Bool     wr,
                     (* port = "writedata" *) Bit#(dw) writedata);
   (* always_ready, result = "readdata" *)
   method Bit#(dw) readdata;
   (* always_ready, result = "readdatavalid" *)
   method Bool readdatavalid;
   (* always_ready, result = "waitrequest" *)
   method Bool waitrequest;
endinterface

module mkAvalonSlave#(AvalonTarget#(aw, dw) target)(AvalonSlavePins#(aw, dw));
   // False in reset and in the first cycle after it: waitrequest is asserted then.
   Reg#(Bool)     ready <- mkReg(False);
   Reg#(Bool)     valid <- mkReg(False);
   Reg#(Bit#(dw)) data  <- mkReg(0);

   // The transfer presented this cycle, if the slave accepts it.
   Wire#(Maybe#(AvalonRequest#(aw, dw))) accepted <- mkDWire(tagged Invalid);

   rule leave_reset (!ready);
      ready <= True;
   endrule

   // Runs every cycle so readdatavalid is a single-cycle pulse per accepted read.
   (* fire_when_enabled, no_implicit_conditions *)
   rule serve;
      Bool isRead = False;
      if (accepted matches tagged Valid .req) begin
         let result <- target.access(req);
         if (!req.write) begin
            isRead = True;
            data <= result;
         end
      end
      valid <= isRead;
   endrule

   method Action bus(Bit#(aw) address, Bool rd, Bool wr, Bit#(dw) writedata);
      // A master must not assert read and write together; should one do so, the
      // write wins and no read data is returned.
      if (ready && (rd || wr))
         accepted <= tagged Valid AvalonRequest { write: wr, address: address,
                                                  writedata: writedata };
   endmethod

   method Bit#(dw) readdata = data;
   method Bool readdatavalid = valid;
   method Bool waitrequest = !ready;
endmodule

endpackage
