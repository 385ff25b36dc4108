"""Decoders of outside input, each in its own module and imported from there: the latency
modules' record streams (records), cyclictest's outputs (cyclictest/), rtla's (rtla, timerlat),
the interruption detector's lines (irqgap), tracefs text (tracefs, irqtrace). They import nothing
of the station."""
