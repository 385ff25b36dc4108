"""Resuming a campaign: complete runs are kept, changed settings are refused."""

from __future__ import annotations

import asyncio

import pytest

from station import api
from station.config import parse_campaign


def _campaign(twin, period: str = "100us"):
    e = twin.endpoints
    return parse_campaign(
        "name: r\n"
        "bench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {e.ssh_port}, identity_file: '{e.identity_file}',"
        f" known_hosts: '{e.known_hosts}'}}\n"
        "  scope: {kind: none}\n"
        f"matrix: {{interfaces: [lpt], variants: [inb, no-inb], samples: 2000, period: {period}}}\n"
    )


def test_resume_keeps_complete_runs_and_refuses_changed_settings(twin, tmp_path):
    out = tmp_path / "out"
    first = asyncio.run(api.run_campaign_async(_campaign(twin), out))
    assert [o.status for o in first.outcomes] == ["complete", "complete"]
    again = asyncio.run(api.run_campaign_async(_campaign(twin), out))
    assert again.outcomes == [] and sorted(again.skipped) == ["lpt-inb-none-r0", "lpt-no-inb-none-r0"]
    with pytest.raises(api.CampaignError, match="measured with different settings.*--fresh"):
        asyncio.run(api.run_campaign_async(_campaign(twin, "200us"), out))
    fresh = asyncio.run(api.run_campaign_async(_campaign(twin, "200us"), out, resume=False))
    assert [o.status for o in fresh.outcomes] == ["complete", "complete"]
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        "lpt-inb-none-r0", "lpt-inb-none-r0.attempt-1", "lpt-no-inb-none-r0", "lpt-no-inb-none-r0.attempt-1"]


def test_resume_with_uploaded_modules_skips_the_complete_runs(twin, tmp_path):
    """Uploading modules before the runs must not make the station forget which runs are done."""
    modules_dir = tmp_path / "ko"
    modules_dir.mkdir()
    (modules_dir / "rtai_lpt_latency.ko").write_bytes(b"\x7fELF twin module\0vermagic=3.4.55-rtai SMP preempt\0")
    e = twin.endpoints
    text = (
        "name: r\n"
        "bench:\n"
        f"  target: {{kind: ssh, host: 127.0.0.1, port: {e.ssh_port}, identity_file: '{e.identity_file}',"
        f" known_hosts: '{e.known_hosts}', upload_modules: '{modules_dir}'}}\n"
        "  scope: {kind: none}\n"
        "matrix: {interfaces: [lpt], variants: [inb, no-inb], samples: 2000, repetitions: REPS}\n"
    )
    out = tmp_path / "out"
    first = asyncio.run(api.run_campaign_async(parse_campaign(text.replace("REPS", "1")), out))
    assert [o.status for o in first.outcomes] == ["complete", "complete"]
    # one more repetition: the bench is set up again (modules uploaded), the first two runs are kept
    again = asyncio.run(api.run_campaign_async(parse_campaign(text.replace("REPS", "2")), out))
    assert sorted(again.skipped) == ["lpt-inb-none-r0", "lpt-no-inb-none-r0"]
    assert [o.run_id for o in again.outcomes] == ["lpt-inb-none-r1", "lpt-no-inb-none-r1"]
