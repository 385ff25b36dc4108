"""The latency modules on the target: parameters, insmod and rmmod (their names:
common/module_names.py)."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

from station.common.module_names import MODULE_PARAM_NAME, MODULE_STEMS, module_stem, vermagic
from station.target import kernel_log
from station.target.ssh import TargetConnection, TargetError

# ours to unload wherever they are found: the latency modules, the GPIO responder and the test-only
# gap injector and GPIO chip (target_modules/linux/irqgap_inject.c, gpio_testchip.c), which a load
# may have left behind. unload_ours() goes in sorted order: gpio_responder before gpio_testchip,
# whose lines it holds (the chip cannot go while they are requested)
ALL_STEMS = frozenset({*MODULE_STEMS.values(), "irqgap_inject", "gpio_responder", "gpio_testchip"})


def module_params(
    family: str, interface: str, *, period_ns: int, check: bool, cpu: int, fmt: str,
    fifo: int, lpt_base: int, lpt_irq: int, extra: dict[str, str | int] | None = None,
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
    params |= {k: str(v) for k, v in (extra or {}).items()}
    return params


def insmod_arguments(params: dict[str, str]) -> str:
    """`name=value ...` for insmod: names must be parameter names, values are quoted, so no
    campaign text can run as a command on the target."""
    for key in params:
        if not re.fullmatch(MODULE_PARAM_NAME, key):  # values go through shlex.quote
            raise TargetError(f"module parameter name {key!r} is not a kernel parameter name")
    return " ".join(f"{k}={shlex.quote(str(v))}" for k, v in params.items())


async def loaded_modules(conn: TargetConnection) -> set[str]:
    """Names of the loaded modules. A kernel without /proc/modules (built without module
    support, or a container that hides it) has none of ours loaded."""
    result = await conn.run("cat /proc/modules", check=False)
    if result.exit_status != 0:
        if "No such file" in (result.stderr or ""):
            return set()
        raise TargetError(f"{conn.endpoint.where}: cannot read /proc/modules: "
                          f"{(result.stderr or '').strip()}")
    return {line.split()[0] for line in (result.stdout or "").splitlines() if line.strip()}


async def insmod(conn: TargetConnection, path: str, params: dict[str, str]) -> None:
    args = insmod_arguments(params)
    result = await conn.run(f"insmod {shlex.quote(path)} {args}", check=False, privileged=True)
    if result.exit_status != 0:
        # the kernel's own words, verbatim, plus dmesg's reason when it gives one
        detail = (result.stderr or "").strip()
        tail = [ln for ln in await kernel_log.snapshot(conn) if ln.strip()][-3:]
        hint = ("\n  dmesg: " + "\n  dmesg: ".join(tail)) if tail else ""
        raise TargetError(f"{conn.endpoint.where}: insmod refused {path}: {detail}{hint}")


async def rmmod(conn: TargetConnection, stem: str, attempts: int = 10) -> None:
    """rmmod, retried briefly while a just-killed reader still holds the device."""
    for attempt in range(attempts):
        result = await conn.run(f"rmmod {shlex.quote(stem)}", check=False, privileged=True)
        if result.exit_status == 0:
            return
        busy = any(w in (result.stderr or "") for w in ("in use", "temporarily unavailable",
                                                        "busy"))
        if not busy or attempt == attempts - 1:
            raise TargetError(f"{conn.endpoint.where}: `rmmod {stem}` failed: "
                              f"{(result.stderr or '').strip()}")
        await asyncio.sleep(0.3)


async def unload_ours(conn: TargetConnection) -> tuple[list[str], list[str]]:
    """rmmod every irq-station latency module that is loaded. Every module is tried;
    returns (unloaded, errors)."""
    unloaded, errors = [], []
    for stem in sorted(await loaded_modules(conn) & ALL_STEMS):
        try:
            await rmmod(conn, stem)
            unloaded.append(stem)
        except TargetError as exc:
            errors.append(str(exc))
    return unloaded, errors


async def file_vermagic(conn: TargetConnection, path: str) -> tuple[bool, str | None]:
    """(whether the module file is on the target, its vermagic): `modinfo -F vermagic` (kmod's),
    else the file's bytes (a target without modinfo)."""
    quoted = shlex.quote(path)
    result = await conn.run(f"modinfo -F vermagic {quoted}", check=False)
    if result.exit_status == 0:
        return True, (result.stdout or "").strip() or None
    if (await conn.run(f"test -f {quoted}", check=False)).exit_status != 0:
        return False, None
    data = await conn.run(f"cat {quoted}", check=False)
    return True, vermagic((data.stdout or "").encode(errors="replace"))


async def upload_modules(conn: TargetConnection, local_dir: Path, stems: set[str],
                         module_dir: str) -> list[str]:
    """Copy prebuilt modules to the target after checking they were built for its kernel."""
    release = (await conn.run("uname -r")).stdout.strip()
    await conn.run(f"mkdir -p {shlex.quote(module_dir)}")
    uploaded = []
    for stem in sorted(stems):
        path = local_dir / f"{stem}.ko"
        if not path.exists():
            raise TargetError(f"{path} does not exist (bench.target.upload_modules); build it for "
                              f"{release}")
        data = path.read_bytes()
        magic = vermagic(data)
        if magic is None or magic.split()[0] != release:
            raise TargetError(
                f"{path} was built for kernel {magic.split()[0] if magic else '(no vermagic)'}, "
                f"but {conn.endpoint.where} runs {release}: rebuild it against that kernel's "
                "headers"
            )
        await conn.upload(data, f"{module_dir.rstrip('/')}/{stem}.ko")
        uploaded.append(stem)
    return uploaded


def interrupts_row(family: str, interface: str, lpt_irq: int) -> int | str:
    """The /proc/interrupts row that counts this module's IRQs: mainline modules
    name their handler after themselves; RTAI ones show under the Linux device."""
    if family == "mainline":
        return module_stem(family, interface)
    return lpt_irq if interface == "lpt" else "de4_echoer"
