"""The mainline modules built for a target's running kernel (`station modules build`, and a
campaign's `module.build: auto`).

On the station, against a kernel build tree for the target's release: `module.kdir`, else the
station's own /lib/modules/<release>/build or /usr/src/linux-headers-<release> (Debian's
headers package), with `module.cross_compile` for another architecture. The sources are the
station's (target_modules/, or the installed package's copy); the build goes to a cache keyed by
the release and the sources' hash, so an unchanged bench builds once.

Or on the target itself, when it has the tree (`module.target_kdir`, else its own
/lib/modules/<release>/build), make, a C compiler and tar: the sources go to a scratch directory
there (mktemp), are built, the .ko files are read back to the station, and the scratch directory
is removed whatever happened. `module.build_on: auto` builds on the station when kdir or
cross_compile is given, else on the target when it can, else on the station.

Either way every built file's vermagic is read back and compared with the target's `uname -r`
**before** anything is uploaded: a tree for another kernel gives modules insmod would refuse,
and they never reach module_dir. (The RTAI modules are built with RTAI's own tree:
target_modules/README.md.)
"""

from __future__ import annotations

import hashlib
import re
import shlex
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from station.common.module_names import vermagic
from station.target.errors import TargetError

if TYPE_CHECKING:
    from station.target.ssh import TargetConnection

# a cross-compiler prefix ("aarch64-linux-gnu-") → the kernel's ARCH
CROSS_ARCH = {"aarch64": "arm64", "arm": "arm", "x86_64": "x86", "i686": "x86", "riscv64": "riscv"}
CROSS_COMPILE = re.compile(r"[A-Za-z0-9_.+-]{1,64}-")


class ModuleBuildError(TargetError):
    """No tree to build against, a build that failed, or modules for another kernel."""


TARGET_BUILD_TIMEOUT_S = 900.0  # make on a slow board (a Raspberry Pi Zero: minutes)
SCRATCH = re.compile(r"/tmp/irq-station-build\.[A-Za-z0-9]{6,32}")  # what mktemp -d made


@dataclass(frozen=True)
class BuildPlan:
    """A campaign's module: settings for building (kinds/module/settings.py)."""

    when: Literal["never", "auto", "always"] = "never"
    kdir: str | None = None  # a tree on the station
    cross_compile: str | None = None
    on: Literal["auto", "station", "target"] = "auto"
    target_kdir: str | None = None  # a tree on the target


@dataclass(frozen=True)
class ModuleBuild:
    """What was built, for which kernel, from which sources: campaign.json's `modules_build`."""

    release: str  # the target's `uname -r`
    kdir: str
    sources_hash: str  # sha256 over the sources (station/vm/latency_modules.py sources_hash)
    out_dir: str
    built_for: dict[str, str]  # file -> its vermagic
    cross_compile: str | None = None
    reused: bool = False  # the cache held this build already
    built_on: str = "station"  # or the target's user@host:port

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def cache_root() -> Path:
    """$IRQ_STATION_MODULES_DIR, else ~/.cache/irq-station/modules."""
    from station.common.cache_dirs import station_cache

    return station_cache("IRQ_STATION_MODULES_DIR", "modules")


RELEASE = re.compile(r"[A-Za-z0-9._+~-]{1,128}")  # what `uname -r` prints (no path, no shell)
UNSAFE_IN_MAKE = re.compile(r"[\s$\"'`\\]")  # KDIR= reaches make's expansion and a recipe's sh


def kdir_for(release: str, given: str | None) -> Path:
    """The kernel build tree to build `release`'s modules against: `given`, else this station's
    own tree for that release."""
    if not RELEASE.fullmatch(release) or release in (".", ".."):
        raise ModuleBuildError(f"the target's `uname -r` printed {release!r}, not a kernel release")
    if given and UNSAFE_IN_MAKE.search(given):
        raise ModuleBuildError(f"module.kdir {given!r}: a path without spaces, quotes, $, ` or \\"
                               " (make and its recipes read it)")
    candidates = ([Path(given).expanduser()] if given else
                  [Path(f"/lib/modules/{release}/build"),
                   Path(f"/usr/src/linux-headers-{release}")])
    for kdir in candidates:
        if (kdir / "Makefile").is_file():
            return kdir
    if given:
        raise ModuleBuildError(f"module.kdir {given} is not a kernel build tree (no Makefile)")
    raise ModuleBuildError(
        f"no kernel build tree for {release} on this station ({' or '.join(map(str, candidates))}):"
        f" install its headers (Debian: apt-get install linux-headers-{release}), or copy the "
        "target's build tree here and give it as module.kdir")


def make_args(cross_compile: str | None) -> tuple[str, ...]:
    if not cross_compile:
        return ()
    if not CROSS_COMPILE.fullmatch(cross_compile):
        raise ModuleBuildError(f"module.cross_compile {cross_compile!r} is not a compiler prefix "
                               "(e.g. aarch64-linux-gnu-)")
    machine = cross_compile.split("-")[0]
    if machine not in CROSS_ARCH:
        raise ModuleBuildError(f"module.cross_compile {cross_compile!r}: no kernel ARCH known for "
                               f"{machine} ({', '.join(CROSS_ARCH)})")
    return f"ARCH={CROSS_ARCH[machine]}", f"CROSS_COMPILE={cross_compile}"


def build_for(release: str, kdir: Path, cross_compile: str | None = None,
              root: Path | None = None) -> ModuleBuild:
    """The mainline modules for `release`, built against `kdir` (or found in the cache), each
    file's vermagic checked against `release`: ModuleBuildError names the kernel they are for
    when it is another."""
    from station.vm import latency_modules
    from station.vm.errors import VmError

    src = latency_modules.module_sources()
    digest = latency_modules.sources_hash(src)
    extra = make_args(cross_compile)
    tag = re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{release}-{cross_compile or 'native'}")
    out = (root or cache_root()) / f"{tag}-{_build_key(digest, kdir, extra)}"
    found = _read_vermagic(out)
    reused = len(found) == len(latency_modules.MODULES) and _matching(found, release)
    if not reused:
        try:
            with tempfile.TemporaryDirectory(prefix="irq-modules-") as scratch:
                latency_modules.build(kdir, Path(scratch), out, src, extra)
        except VmError as exc:
            raise ModuleBuildError(str(exc).replace("module build", "the module build")) from None
        found = _read_vermagic(out)
    record = ModuleBuild(release, str(kdir), digest, str(out), found, cross_compile, reused)
    _refuse_other_kernel(record, "module.kdir")
    return record


def _refuse_other_kernel(record: ModuleBuild, setting: str) -> None:
    found, release = record.built_for, record.release
    if _matching(found, release):
        return
    other = sorted({magic.split()[0] if magic else "(no vermagic)" for magic in found.values()})
    where = "" if record.built_on == "station" else f" on {record.built_on}"
    raise ModuleBuildError(
        f"the modules built{where} against {record.kdir} are for kernel {', '.join(other)} "
        f"(their vermagic: {next(iter(found.values()), '')!r}), but the target runs {release}: "
        f"refused before upload (insmod would say Invalid module format). Give {setting} for "
        f"{release}")


def target_tree(release: str, given: str | None) -> str:
    """The build tree on the target: `given`, else its own /lib/modules/<release>/build."""
    if not RELEASE.fullmatch(release) or release in (".", ".."):
        raise ModuleBuildError(f"the target's `uname -r` printed {release!r}, not a kernel release")
    tree = given or f"/lib/modules/{release}/build"
    if not tree.startswith("/") or UNSAFE_IN_MAKE.search(tree):
        raise ModuleBuildError(f"module.target_kdir {tree!r}: an absolute path without spaces, "
                               "quotes, $, ` or \\ (make and its recipes read it)")
    return tree


async def target_cannot_build(conn: TargetConnection, tree: str) -> str | None:
    """None when the target can build against `tree`; else what it lacks, in words."""
    lacking = [tool for tool in ("make", "cc", "tar")
               if (await conn.run(f"command -v {tool}", check=False)).exit_status != 0]
    if (await conn.run(f"test -f {shlex.quote(tree)}/Makefile", check=False)).exit_status != 0:
        lacking.append(f"a kernel build tree at {tree} (Debian: the linux-headers package for "
                       "its kernel)")
    return ", ".join(lacking) or None


async def build_on_target(conn: TargetConnection, release: str, tree: str,
                          root: Path | None = None) -> ModuleBuild:
    """The mainline modules built on the target against its `tree`, in a scratch directory
    removed afterwards; the .ko files read back into the station's cache (`root`), their
    vermagic checked against `release` before anything goes to module_dir."""
    from station.vm import latency_modules

    src = latency_modules.module_sources()
    digest = latency_modules.sources_hash(src)
    where = conn.endpoint.where
    made = (await conn.run("mktemp -d /tmp/irq-station-build.XXXXXXXX")).stdout.strip()
    if not SCRATCH.fullmatch(made):
        raise ModuleBuildError(f"{where}: mktemp -d printed {made!r}, not a scratch directory")
    scratch = shlex.quote(made)
    try:
        await conn.upload(latency_modules.sources_tarball(src), f"{made}/sources.tar.gz")
        await conn.run(f"tar -xzf {scratch}/sources.tar.gz -C {scratch}")
        result = await conn.run(f"make -C {scratch}/target_modules KDIR={shlex.quote(tree)} W=1",
                                check=False, timeout=TARGET_BUILD_TIMEOUT_S)
        if result.exit_status != 0:
            output = ((result.stdout or "") + (result.stderr or "")).strip()
            raise ModuleBuildError(f"the module build on {where} against {tree} failed:\n"
                                   f"{output[-3000:]}")
        built = {name: await conn.download(f"{made}/target_modules/linux/{name}")
                 for name in latency_modules.MODULES}
    finally:
        await conn.run(f"rm -rf {scratch}", check=False)
    tag = re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{release}-on-{where}")
    out = (root or cache_root()) / f"{tag}-{digest[:16]}"
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.ko"):
        stale.unlink()
    for name, data in built.items():
        (out / name).write_bytes(data)
    record = ModuleBuild(release, tree, digest, str(out), _read_vermagic(out), None, False, where)
    _refuse_other_kernel(record, "module.target_kdir")
    return record


def _build_key(sources_hash: str, kdir: Path, extra: tuple[str, ...]) -> str:
    """What a build depends on: the sources, the tree (where it is, and the files that make its
    modules what they are: a tree rebuilt in place with another .config gives other modules)
    and make's extra variables."""
    h = hashlib.sha256(f"{sources_hash}\0{kdir.resolve()}\0{' '.join(extra)}".encode())
    for name in (".config", "Module.symvers", "include/generated/utsrelease.h",
                 "include/config/kernel.release"):
        part = kdir / name
        h.update(name.encode() + b"\0" + (part.read_bytes() if part.is_file() else b"-") + b"\0")
    return h.hexdigest()[:16]


def _read_vermagic(out: Path) -> dict[str, str]:
    if not out.is_dir():
        return {}
    return {ko.name: vermagic(ko.read_bytes()) or "" for ko in sorted(out.glob("*.ko"))}


def _matching(found: dict[str, str], release: str) -> bool:
    return bool(found) and all(magic.split()[:1] == [release] for magic in found.values())
