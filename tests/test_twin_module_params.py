"""The twin's insmod accepts and refuses what the modules' C does (issue 28): its rules are read
from target_modules/, so a hand-written copy cannot drift; what it once got wrong is checked
through a real SSH session, and a check that compares the twin's rules with a tree's C fails when
one range in a copy of the C is changed."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from station.target import TargetError, modules
from station.target.ssh import TargetConnection
from station.twin.module_params import MODULE_FILES, module_rules, parse_rules, sources
from tests.test_twin_ssh import _endpoint


@pytest.mark.parametrize("params, words", [
    ({"bufsize": "65536"}, "unknown parameter"),  # the RTAI modules have an RT FIFO, no ring
    ({"fifo_size": "100"}, "Invalid parameters"),  # RTAI_FIFO_SIZE_MIN is 16 records: 640 bytes
    ({"irq": "0"}, "Invalid parameters"),
    ({"base": "0"}, "Invalid parameters"),
    ({"fifo": "64"}, "Invalid parameters"),  # RTAI's FIFO table has 64
])
def test_the_twin_refuses_what_the_rtai_module_refuses(twin, params, words):
    async def main():
        conn = await TargetConnection.open(_endpoint(twin))
        try:
            with pytest.raises(TargetError, match=words):
                await modules.insmod(conn, "/opt/irq-station/modules/rtai_lpt_latency.ko", params)
            assert not (await modules.loaded_modules(conn)) & modules.ALL_STEMS
            # and takes the bounds themselves
            await modules.insmod(conn, "/opt/irq-station/modules/rtai_lpt_latency.ko",
                                 {"fifo_size": "640", "irq": "1", "base": "0x378", "fifo": "63"})
            await modules.rmmod(conn, "rtai_lpt_latency")
        finally:
            await conn.close()

    asyncio.run(main())


def _differences(root) -> list[str]:
    """Where the rules read from the sources under `root` differ from the twin's."""
    out = []
    for stem, files in MODULE_FILES.items():
        theirs = parse_rules([(root / rel).read_text() for rel in files]).params
        ours = module_rules(stem).params
        out += [f"{stem}.{k}: twin {ours.get(k)} vs C {theirs.get(k)}" for k in set(ours) | set(theirs)
                if ours.get(k) != theirs.get(k)]
    return out


def test_a_changed_range_in_the_c_is_a_difference_with_the_twin(tmp_path):
    assert _differences(sources()) == []
    copy = tmp_path / "target_modules"
    shutil.copytree(sources(), copy, ignore=shutil.ignore_patterns("*.o", "*.ko", ".*"))
    header = copy / "rtai" / "rtai_common.h"
    header.write_text(header.read_text().replace("(16U * IRQS_RECORD_SIZE)", "(32U * IRQS_RECORD_SIZE)"))
    assert [d.split(":")[0] for d in _differences(copy)] == ["rtai_lpt_latency.fifo_size",
                                                            "rtai_pcie_latency.fifo_size"]
    main = copy / "linux" / "lpt_main.c"
    main.write_text(main.read_text().replace("module_param(threaded, bool, 0444);", ""))
    assert "lpt_latency.threaded" in " ".join(_differences(copy))


def test_the_rules_are_the_c_checks_read_as_ranges():
    rtai = module_rules("rtai_lpt_latency").params
    assert (rtai["fifo_size"].low, rtai["fifo_size"].high) == (16 * 40, 64 << 20)
    assert (rtai["fifo"].low, rtai["fifo"].high) == (0, 63)
    assert (rtai["base"].low, rtai["base"].high) == (1, 0xFFFF - 2)
    assert rtai["irq"].low == 1 and rtai["irq"].high is None  # RTAI_NR_IRQS: RTAI's, unknown here
    assert "bufsize" not in rtai
    mainline = module_rules("lpt_latency").params
    assert (mainline["bufsize"].low, mainline["bufsize"].high, mainline["bufsize"].power_of_two) == (16, 4 << 20, True)
    assert module_rules("lpt_latency").check({"bufsize": "1000"}) == "bufsize=1000 invalid: a power of two"


def test_numbers_and_counters_as_the_kernel_takes_them():
    """kstrto*() with base 0: 0x64 is 100 and 010 is 8 (Python's int(…, 0) refuses the latter); a
    module_param_cb counter (dropped, missed) cannot be set at load."""
    from station.twin.module_params import kernel_int

    assert (kernel_int("0x64"), kernel_int("010"), kernel_int("-1"), kernel_int("100")) == (100, 8, -1, 100)
    rules = module_rules("rtai_lpt_latency")
    assert rules.check({"period_us": "0x64", "fifo": "010"}) is None
    assert rules.check({"dropped": "0"}) == "dropped is a read-only counter"
