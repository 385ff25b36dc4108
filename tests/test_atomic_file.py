"""Files the station writes for others to poll (twin.json, campaign.json, manifests, sidecars)
appear whole or not at all."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from station.common.atomic_file import replace_atomically, write_text_atomically


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "campaign.json"
    path.write_text('{"old": 1}\n')

    def half_then_fail(tmp: Path) -> None:
        tmp.write_text('{"new": ')
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        replace_atomically(path, half_then_fail)
    assert json.loads(path.read_text()) == {"old": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["campaign.json"]


def test_a_reader_polling_for_the_file_never_reads_it_empty_or_partial(tmp_path: Path) -> None:
    """The race that failed CI once: a reader saw twin.json exist and read it before its
    writer had filled it. A big document written over and over while another process reads."""
    path = tmp_path / "twin.json"
    doc = {"pad": "x" * 200_000, "ssh_port": 2222}
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            write_text_atomically(path, json.dumps(doc))

    reader = (
        "import json, os, sys, time\n"
        "p = sys.argv[1]; seen = 0; t = time.monotonic()\n"
        "while seen < 300 and time.monotonic() - t < 60:\n"
        "    if os.path.exists(p):\n"
        "        assert json.loads(open(p).read())['ssh_port'] == 2222\n"
        "        seen += 1\n"
        "print(seen)\n"
    )
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        out = subprocess.run([sys.executable, "-c", reader, str(path)], capture_output=True,
                             text=True, timeout=120)
    finally:
        stop.set()
        thread.join()
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 0


def test_the_twin_endpoints_are_written_through_it(tmp_path: Path) -> None:
    from station.twin.runner import TwinEndpoints

    path = tmp_path / "twin.json"
    TwinEndpoints("127.0.0.1", 2222, "root", "k", "kh", "TCPIP::127.0.0.1::5025::SOCKET").write(path)
    assert TwinEndpoints.read(path).ssh_port == 2222
    assert sorted(p.name for p in tmp_path.iterdir()) == ["twin.json"]


def test_two_writers_of_one_file_never_tear_it(tmp_path: Path) -> None:
    """Two writers at once (`station check --junit` aimed at a file a campaign writes too): each
    read finds one writer's document whole, and no temporary file is left."""
    path = tmp_path / "check-junit.xml"
    docs = [json.dumps({"writer": w, "pad": str(w) * 100_000}) for w in (1, 2)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(text: str) -> None:
        try:
            while not stop.is_set():
                write_text_atomically(path, text)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(d,)) for d in docs]
    for t in threads:
        t.start()
    seen = set()
    try:
        for _ in range(2_000):
            if path.exists():
                seen.add(json.loads(path.read_text())["writer"])
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert seen and seen <= {1, 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check-junit.xml"]
