"""The latency modules on the target: names, parameters, insmod and rmmod."""

from __future__ import annotations

import shlex

from station.target.ssh import TargetConnection, TargetError

MODULE_STEMS = {
    ("rtai", "lpt"): "rtai_lpt_latency",
    ("rtai", "pcie"): "rtai_pcie_latency",
    ("mainline", "lpt"): "lpt_latency",
    ("mainline", "pcie"): "pcie_latency",
}
ALL_STEMS = frozenset(MODULE_STEMS.values())


def module_stem(family: str, interface: str) -> str:
    return MODULE_STEMS[(family, interface)]


def stream_device(family: str, interface: str, fifo: int) -> str:
    return f"/dev/rtf{fifo}" if family == "rtai" else f"/dev/{module_stem(family, interface)}"


def module_params(
    family: str, interface: str, *, period_ns: int, check: bool, cpu: int, fmt: str,
    fifo: int, lpt_base: int, lpt_irq: int,
) -> dict[str, str]:
    """Parameter names as documented in target_modules/README.md."""
    params = {
        "period_us": str(max(period_ns // 1000, 1)),
        "check": "1" if check else "0",
        "cpu": str(cpu),
        "format": fmt,
    }
    if interface == "lpt":
        params |= {"base": hex(lpt_base), "irq": str(lpt_irq)}
    if family == "rtai":
        params["fifo"] = str(fifo)
    return params


async def loaded_modules(conn: TargetConnection) -> set[str]:
    out = (await conn.run("lsmod")).stdout
    return {line.split()[0] for line in out.splitlines()[1:] if line.strip()}


async def insmod(conn: TargetConnection, path: str, params: dict[str, str]) -> None:
    args = " ".join(f"{k}={shlex.quote(v)}" for k, v in params.items())
    result = await conn.run(f"insmod {shlex.quote(path)} {args}", check=False)
    if result.exit_status != 0:
        # the kernel's own words, verbatim, plus dmesg's reason when it gives one
        detail = (result.stderr or "").strip()
        dmesg = await conn.run("dmesg", check=False, timeout=10)
        tail = [ln for ln in (dmesg.stdout or "").splitlines() if ln.strip()][-3:]
        hint = ("\n  dmesg: " + "\n  dmesg: ".join(tail)) if tail else ""
        raise TargetError(f"{conn.endpoint.where}: insmod refused {path}: {detail}{hint}")


async def rmmod(conn: TargetConnection, stem: str) -> None:
    await conn.run(f"rmmod {shlex.quote(stem)}")


async def unload_ours(conn: TargetConnection) -> list[str]:
    """rmmod every irq-station latency module that is loaded; returns their names."""
    ours = sorted(await loaded_modules(conn) & ALL_STEMS)
    for stem in ours:
        await rmmod(conn, stem)
    return ours
