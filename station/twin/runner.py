"""Start and stop the twin: the SSH target and the SCPI scope, fed by one model,
on free 127.0.0.1 ports, in a background thread with its own event loop (so the
station's blocking VISA calls never stall it) or in the foreground (`station twin`).
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from station.common.atomic_file import write_text_atomically
from station.twin.clock import (
    DEFAULT_DRIFT_PPM,
    DEFAULT_SCOPE_TIMEBASE_PPM,
    DriftingClock,
    ScopeView,
    Slew,
)
from station.twin.miswire import OTHER_KERNEL, Miswiring, Unplugged
from station.twin.model import load_preset
from station.twin.ssh_server import TwinSSHServer, write_client_key
from station.twin.target import EmulatedTarget


@dataclass(frozen=True)
class TwinEndpoints:
    """Everything a campaign needs to reach the twin as an ordinary bench."""

    ssh_host: str
    ssh_port: int
    user: str
    identity_file: str
    known_hosts: str
    scope_resource: str
    generator_resource: str = ""  # a gpio campaign's twin only

    def write(self, path: Path) -> None:
        # atomically: `station twin`'s callers poll for this file and read it once it exists
        write_text_atomically(path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> TwinEndpoints:
        return cls(**json.loads(path.read_text()))


class Twin:
    def __init__(
        self,
        state_dir: Path | None = None,
        preset: str = "seed-2015",
        seed: int = 2015,
        overrides: dict[str, dict[str, Any]] | None = None,
        truth_dir: Path | None = None,
        scope_options: dict[str, Any] | None = None,
        with_scope: bool = True,
        board: dict[str, int] | None = None,
        target_drift_ppm: float = DEFAULT_DRIFT_PPM,
        target_slews: tuple[Slew, ...] = (),
        scope_timebase_ppm: float = DEFAULT_SCOPE_TIMEBASE_PPM,
        independent: bool = False,
        miswiring: Miswiring | None = None,
    ) -> None:
        """`board` (a gpio campaign): the twin is a board answering GPIO edges, with a generator
        on its input; the dict names the scope's stimulus and response channels and the
        generator's channel. `miswiring`: the bench faults it plays on purpose (twin/miswire.py)."""
        self.miswiring = miswiring or Miswiring()
        if board is not None and self.miswiring.response_channel is None:
            self.miswiring = replace(self.miswiring, response_channel=board["response_channel"])
        self._tmp = None if state_dir else tempfile.TemporaryDirectory(prefix="irq-twin-")
        self.state_dir = Path(state_dir or self._tmp.name)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.preset = load_preset(preset).with_overrides(overrides or {})
        if independent:  # every event its own draw (Preset.independent)
            self.preset = self.preset.independent()
        self.board = board
        self.seed = seed
        self.target = EmulatedTarget(self.preset, seed,
                                     hostname="pi-twin" if board else "rtai-twin",
                                     board=board is not None, drift_ppm=target_drift_ppm,
                                     slews=target_slews,
                                     **({"modules_built_for": OTHER_KERNEL}
                                        if "module_other_kernel" in self.miswiring.faults else {}))
        self.scope_clock = DriftingClock(scope_timebase_ppm)
        self.target.truth_dir = truth_dir
        self.target.scope_clock = self.scope_clock
        self.scope_options = scope_options or {}
        self.with_scope = with_scope
        self.endpoints: TwinEndpoints | None = None
        self._ssh: TwinSSHServer | None = None
        self._scope: Any = None
        self._generator: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._response: Any = None  # the board's output line (a gpio campaign)
        # its truth file, the scope's acquisitions before it
        self._board_run: tuple[Path, int] | None = None
        self._thread: threading.Thread | None = None

    async def start_async(self) -> TwinEndpoints:
        key_path = self.state_dir / "client_key"
        public = write_client_key(key_path)
        self._ssh = TwinSSHServer(self.target, public)
        await self._ssh.start()
        known_hosts = self.state_dir / "known_hosts"
        known_hosts.write_text(self._ssh.known_hosts_line())
        scope_resource = generator_resource = ""
        # the scope watches the target's pin on its own timebase
        source, options = ScopeView(self.target, self.target.clock,
                                    self.scope_clock), dict(self.scope_options)
        options |= self.miswiring.scope_options()
        if "unplugged" in self.miswiring.faults:
            source = Unplugged(source)
        if self.board is not None:
            from instruments.sim.funcgen import SimGeneratorServer
            from station.twin.board import BoardResponse

            self._generator = SimGeneratorServer(host="127.0.0.1", port=0, seed=self.seed,
                                                 clock=self.target.now_ns)
            await self._generator.start()
            generator_resource = self._generator.resource
            assert self.target.board is not None
            faults = set(self.miswiring.faults)
            stimulus = self._generator.source(self.board["generator_channel"])
            # the board's input line: the generator's output unless its cable misses the board
            board_input = (Unplugged(stimulus) if faults & {"board_unplugged", "unplugged"}
                           else stimulus)
            response = self._response = BoardResponse(board_input, self.target.board.log,
                                                       seed=self.seed)
            source = Unplugged(stimulus) if "unplugged" in faults else stimulus
            stimulus_channel = (self.miswiring.probe_channel if "other_channel" in faults
                                else self.board["stimulus_channel"])
            response_channel = self.miswiring.response_probe_channel
            assert response_channel is not None
            options |= {"probe_channel": stimulus_channel,
                        "channel_sources": {response_channel: response}}
        if self.with_scope:
            from instruments.sim import SimScopeServer

            self._scope = SimScopeServer(source, host="127.0.0.1", port=0, **options)
            await self._scope.start()
            scope_resource = f"TCPIP::127.0.0.1::{self._scope.port}::SOCKET"
        self.endpoints = TwinEndpoints(
            ssh_host="127.0.0.1",
            ssh_port=self._ssh.port,
            user="root",
            identity_file=str(key_path),
            known_hosts=str(known_hosts),
            scope_resource=scope_resource,
            generator_resource=generator_resource,
        )
        self.endpoints.write(self.state_dir / "twin.json")
        return self.endpoints

    async def stop_async(self) -> None:
        if self._scope is not None:
            await self._scope.stop()
        if self._generator is not None:
            await self._generator.stop()
        if self._ssh is not None:
            await self._ssh.stop()

    # ---- background-thread use (in-process twin for `target: twin`) ------------------
    def start_in_thread(self) -> TwinEndpoints:
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop_async())
            # SSH sessions still open (a stream a client never closed) end with the twin
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=main, name="irq-twin", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        assert self.endpoints is not None
        return self.endpoints

    def call(self, fn, *args):  # noqa: ANN001 - run a plain function on the twin's loop
        """Run fn on the twin's thread (its state is not thread-safe); its exception is raised
        here."""
        assert self._loop is not None

        async def run():  # noqa: ANN202
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=10)

    def stop_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if self._tmp is not None:
            self._tmp.cleanup()

    def set_truth_path(self, path: Path | None) -> None:
        """Where the twin writes the ground truth of the next module it loads."""
        self.call(setattr, self.target, "truth_path_next", path)

    def begin_run(self, run_id: str, truth_path: Path | None,
                  load_effect: dict[str, Any] | None = None) -> None:
        """The next module load belongs to this run: its random streams are keyed to the run's
        identity, its injected events go to truth_path (None: not kept), and its load set does
        `load_effect` to the latency (model.with_load_effect's keywords; None: nothing more)."""
        self.call(setattr, self.target, "run_key_next", run_id)
        self.call(setattr, self.target, "load_effect_next", load_effect)
        self.set_truth_path(truth_path)
        if self._response is not None and self._scope is not None:
            self._board_run = None if truth_path is None else (truth_path,
                                                               len(self._scope.acquisitions))

    def end_run(self) -> None:
        """A gpio run's truth, what the board did with every stimulus edge the scope recorded in it:
        per acquisition since begin_run (its number in the run, from 0, and where the scope put its
        trigger on the twin's clock), each edge, its answer and the periodic handler it waited
        behind."""
        if self._board_run is None:
            return
        path, before = self._board_run
        self._board_run = None
        self.call(self._write_board_truth, path, before)

    def _write_board_truth(self, path: Path, before: int) -> None:
        import pandas as pd

        parts = []
        for n, acq in enumerate(self._scope.acquisitions[before:]):
            first, end = acq.first_sample_ns, acq.first_sample_ns + acq.dt_ns * acq.record_length
            rows = self._response.truth(int(math.floor(first)), int(math.ceil(end)))
            parts.append(pd.DataFrame({"acquisition": n, "trigger_ns": acq.trigger_ns,
                                       "record_start_ns": first,
                                       "record_end_ns": end, **rows}))
        frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
            columns=["acquisition", "trigger_ns", "edge_ns"])
        frame.to_parquet(path, index=False)

    def ground_truth_summary(self) -> dict[str, Any]:
        if self.board is not None:
            from station.twin import board

            summary: dict[str, Any] = {"board": board.describe()}
        else:
            summary = {"preset": self.preset.as_dict()}
        if self.miswiring.faults:
            summary["miswire"] = self.miswiring.truth()
        return summary


async def serve_forever(twin: Twin, stop: asyncio.Event) -> None:
    await twin.start_async()
    try:
        await stop.wait()
    finally:
        await twin.stop_async()
