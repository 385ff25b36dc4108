# irq_echoer_hw.tcl - Qsys / Platform Designer component for the irq-station IRQ echoer.
#
# HDL: verilog/mkIrqEchoer.v, generated from src/IrqEchoer.bsv by `make -C fpga verilog`.
# Interfaces: clock + reset, one Avalon-MM slave (connect to the PCIe core's BAR0 Rx
# master), one interrupt sender (to the PCIe core's interrupt receiver) and the
# irqflagtap conduit (export it and route it to a GPIO pin for the scope).
# Port names must match the generated Verilog; tests/test_register_map.py checks that.

package require -exact qsys 13.1

set_module_property NAME irq_echoer
set_module_property DISPLAY_NAME "IRQ echoer (irq-station)"
set_module_property DESCRIPTION "Write 0x00 raises an IRQ, read 0x04 returns the value and clears it; per-event cycle timestamps. Register map: fpga/registers.yaml"
set_module_property VERSION 2.0
set_module_property GROUP "irq-station"
set_module_property AUTHOR "irq-station"
set_module_property INSTANTIATE_IN_SYSTEM_MODULE true
set_module_property EDITABLE false
set_module_property INTERNAL false
set_module_property VALIDATION_CALLBACK validate

add_fileset QUARTUS_SYNTH QUARTUS_SYNTH "" ""
set_fileset_property QUARTUS_SYNTH TOP_LEVEL mkIrqEchoer
add_fileset_file mkIrqEchoer.v VERILOG PATH verilog/mkIrqEchoer.v TOP_LEVEL_FILE

add_fileset SIM_VERILOG SIM_VERILOG "" ""
set_fileset_property SIM_VERILOG TOP_LEVEL mkIrqEchoer
add_fileset_file mkIrqEchoer.v VERILOG PATH verilog/mkIrqEchoer.v

# CLOCK_HZ comes from the frequency Qsys knows for the connected clock, so the register
# cannot disagree with the clock that really drives the counter.
add_parameter clockHz LONG 125000000
set_parameter_property clockHz DISPLAY_NAME "Design clock (Hz), reported in CLOCK_HZ"
set_parameter_property clockHz UNITS Hertz
set_parameter_property clockHz SYSTEM_INFO {CLOCK_RATE clock}
set_parameter_property clockHz AFFECTS_GENERATION true
set_parameter_property clockHz HDL_PARAMETER true
set_parameter_property clockHz VISIBLE true
set_parameter_property clockHz ENABLED false

proc validate {} {
    set hz [get_parameter_value clockHz]
    if {$hz <= 0 || $hz > 4294967295} {
        send_message error "irq_echoer: the frequency of the clock driving it is unknown ($hz Hz); connect it to the PCIe core clock (pcie_core_clk) so CLOCK_HZ is right"
    } else {
        send_message info "irq_echoer: CLOCK_HZ = $hz (one timestamp tick = [expr {1e9 / $hz}] ns)"
    }
}

add_interface clock clock end
set_interface_property clock clockRate 0
add_interface_port clock CLK clk Input 1

# BSV registers reset synchronously on an active-low RST_N.
add_interface reset reset end
set_interface_property reset associatedClock clock
set_interface_property reset synchronousEdges DEASSERT
add_interface_port reset RST_N reset_n Input 1

# Pipelined slave: read data one cycle after the read is accepted, marked by
# readdatavalid; waitrequest only while leaving reset. Word addresses, 16 words.
add_interface s0 avalon end
set_interface_property s0 addressUnits WORDS
set_interface_property s0 associatedClock clock
set_interface_property s0 associatedReset reset
set_interface_property s0 bitsPerSymbol 8
set_interface_property s0 burstOnBurstBoundariesOnly false
set_interface_property s0 explicitAddressSpan 0
set_interface_property s0 holdTime 0
set_interface_property s0 linewrapBursts false
set_interface_property s0 maximumPendingReadTransactions 2
set_interface_property s0 readLatency 0
set_interface_property s0 readWaitTime 0
set_interface_property s0 setupTime 0
set_interface_property s0 timingUnits Cycles
set_interface_property s0 writeWaitTime 0
set_interface_property s0 isMemoryDevice false
set_interface_property s0 isNonVolatileStorage false
set_interface_property s0 printableDevice false
add_interface_port s0 avs_address address Input 4
add_interface_port s0 avs_read read Input 1
add_interface_port s0 avs_write write Input 1
add_interface_port s0 avs_writedata writedata Input 32
add_interface_port s0 avs_readdata readdata Output 32
add_interface_port s0 avs_readdatavalid readdatavalid Output 1
add_interface_port s0 avs_waitrequest waitrequest Output 1

# Level interrupt, high from the cycle after SEND until the cycle after a clearing RECV.
add_interface irq interrupt end
set_interface_property irq associatedAddressablePoint s0
set_interface_property irq associatedClock clock
set_interface_property irq associatedReset reset
add_interface_port irq ins_irq irq Output 1

# The same flag for a GPIO pin: export it from the Qsys system.
add_interface irqflagtap conduit end
set_interface_property irqflagtap associatedClock clock
set_interface_property irqflagtap associatedReset reset
add_interface_port irqflagtap coe_irqflagtap export Output 1
