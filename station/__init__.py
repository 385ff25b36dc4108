"""irq-station: interrupt latency of real-time Linux targets, measured by the
target's software and by an oscilloscope, compared event class by event class.

The public API lives in :mod:`station.api`.
"""
