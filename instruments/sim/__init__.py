"""A simulated oscilloscope: a real SCPI server on TCP, fed by any edge source."""

from instruments.sim.server import SimScopeServer, run_in_thread
from instruments.sim.signal import LogicSignal
from instruments.sim.source import EdgeSource, PeriodicEdgeSource
from instruments.sim.tds import AcquisitionInfo

__all__ = [
    "AcquisitionInfo",
    "EdgeSource",
    "LogicSignal",
    "PeriodicEdgeSource",
    "SimScopeServer",
    "run_in_thread",
]
