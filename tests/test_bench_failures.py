"""An unreachable target and a scope that does not answer each end with one
clear message and a non-zero exit, no traceback, and nothing left on the target."""

from __future__ import annotations

import pytest

from tests.conftest import free_port as _free_port
from tests.conftest import run_station


def test_unreachable_target(tmp_path):
    cfg = tmp_path / "c.yaml"
    port = _free_port()  # nothing listens there
    cfg.write_text(
        "name: x\nbench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {port}, connect_timeout: 3s}}\n"
        "  scope: {kind: none}\n"
        "matrix: {samples: 100}\n"
    )
    res = run_station("run", str(cfg), "--out", str(tmp_path / "out"), timeout=60)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: target: cannot reach 127.0.0.1:{port}")


@pytest.fixture
def mute_scope():
    from instruments.sim import SimScopeServer, run_in_thread

    class NoEdges:
        def now_ns(self) -> int:
            return 0

        def edges(self, t0, t1):
            import numpy as np

            return np.empty((0, 2), dtype=np.int64)

    server = SimScopeServer(NoEdges(), host="127.0.0.1", port=0, mute=True)
    with run_in_thread(server) as running:
        yield f"TCPIP::127.0.0.1::{running.port}::SOCKET"


def test_scope_that_does_not_answer(tmp_path, mute_scope):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "name: x\nbench:\n"
        "  target: {kind: twin}\n"
        f"  scope: {{kind: visa, resource: '{mute_scope}', timeout: 2s}}\n"
        "matrix: {samples: 100}\n"
    )
    res = run_station("run", str(cfg), "--out", str(tmp_path / "out"), timeout=60)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "scope" in errors[0] and mute_scope in errors[0]
    assert not (tmp_path / "out" / "runs").exists() or not any((tmp_path / "out" / "runs").iterdir())


def test_garbage_key_file_is_one_clear_error(tmp_path):
    key = tmp_path / "id_bad"
    key.write_text("this is not a private key\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "name: x\nbench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {_free_port()}, identity_file: '{key}'}}\n"
        "  scope: {kind: none}\n"
        "matrix: {samples: 100}\n"
    )
    for command in (["validate", str(cfg)], ["run", str(cfg), "--out", str(tmp_path / "out")], ["cleanup", str(cfg)]):
        res = run_station(*command, timeout=60)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert f"c.yaml:3: bench.target.identity_file: {key} is not a private key SSH can read" in res.stderr


def test_garbage_key_file_through_the_api_is_refused_once(tmp_path):
    """Python callers skip the file check of load_campaign: the connection refuses, plainly."""
    import asyncio

    from station import api
    from station.config import parse_campaign

    key = tmp_path / "id_bad"
    key.write_text("this is not a private key\n")
    campaign = parse_campaign(
        f"name: x\nbench: {{target: {{kind: ssh, host: 127.0.0.1, port: {_free_port()}, identity_file: '{key}'}},"
        " scope: {kind: none}}\nmatrix: {samples: 100}\n"
    )
    with pytest.raises(api.CampaignError, match="cannot read the key files"):
        asyncio.run(api.run_campaign_async(campaign, tmp_path / "out"))
