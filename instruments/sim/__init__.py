"""A simulated oscilloscope: a real SCPI server on TCP, fed by any edge source."""

from instruments.sim.scope_model import AcquisitionInfo
from instruments.sim.server import SimScopeServer, run_in_thread
from instruments.sim.signal import LogicSignal
from instruments.sim.source import EdgeSource, PeriodicEdgeSource

__all__ = [
    "AcquisitionInfo",
    "EdgeSource",
    "LogicSignal",
    "PeriodicEdgeSource",
    "SimScopeServer",
    "run_in_thread",
]
