"""The guest's root filesystem, an initramfs: busybox, dropbear, the NIC driver, our modules, the
load and probe tools (cyclictest, hackbench, stressapptest, stress-ng, pgrep/pkill, chrt), /init.

Everything comes from installed Debian packages (HOST_SOURCES) and from the unpacked linux-image;
nothing is downloaded here. Dynamically linked binaries bring the libraries ldd finds for them on
this host. Another architecture's guest (arm64) takes the same files from a sysroot of that
architecture's Debian packages unpacked by station/vm/guest_root.py: its binaries cannot run here,
so their libraries are found by reading each ELF file's dynamic section (readelf), and busybox
makes its applets' links itself at boot.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from station.vm.cpio import Tree
from station.vm.errors import VmError

BUSYBOX = Path("/bin/busybox")
DROPBEAR = Path("/usr/sbin/dropbear")
# optional: lets SFTP clients (asyncssh, scp -s) in
SFTP_SERVER = Path("/usr/lib/openssh/sftp-server")
# the guest's load and probe tools: binary -> the Debian package it comes from (hostdeps installs
# them)
GUEST_TOOLS: dict[str, str] = {
    "/usr/bin/cyclictest": "rt-tests",
    "/usr/bin/hackbench": "rt-tests",
    "/usr/bin/stressapptest": "stressapptest",
    "/usr/bin/stress-ng": "stress-ng",
    "/usr/bin/pgrep": "procps",  # busybox-static has no pgrep/pkill
    "/usr/bin/pkill": "procps",
    "/usr/bin/chrt": "util-linux",  # essential in Debian; busybox has taskset but no chrt
    # osnoise/hwnoise: the kernel's own noise tracers (the RT kernel has them)
    "/usr/bin/rtla": "rtla",
}
# not built for every architecture by Debian: left out of that guest (its image says so)
NOT_PACKAGED: dict[str, tuple[str, ...]] = {"arm64": ("/usr/bin/stressapptest",)}
# glibc dlopen()s libgcc_s for pthread_cancel/pthread_exit unwinding: ldd does not list it for C
# programs
DLOPENED = ("libgcc_s.so.1",)
# the packages whose files the initramfs copies: their versions are inputs of its cache key
HOST_SOURCES = ("busybox-static", "dropbear-bin", "openssh-sftp-server",
                *dict.fromkeys(GUEST_TOOLS.values()), "libc6")
GUEST_MODULES = "opt/irq-station/modules"
HOST_KEY = "etc/dropbear/dropbear_ed25519_host_key"
INIT_MARKER = "irq-station-vm: /init at"
SSHD_MARKER = "irq-station-vm: dropbear up at"

# QEMU user networking: the guest is always 10.0.2.15 behind the gateway 10.0.2.2, so no DHCP wait.
INIT = """#!/bin/sh
# PID 1 until the last line: mount, network, SSH; then busybox init reaps orphans (the station's
# setsid'd loads) so a finished process never lingers as a zombie that `kill -0` still finds.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
{install_applets}mount -t proc proc /proc
echo "{init_marker} $(cut -d' ' -f1 /proc/uptime) s"
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
# tracefs for trace instances (ftrace events); no modprobe here, and msr stays unloaded
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || echo "irq-station-vm: no tracefs"
hostname irq-vm
for m in {nic_modules}; do
\tinsmod "$m" || echo "irq-station-vm: insmod $m failed"
done
ip link set lo up
ip addr add 10.0.2.15/24 dev eth0
ip link set eth0 up
ip route add default via 10.0.2.2
# e1000 reports its link a moment after "up"; until then slirp's forwarded SYNs go nowhere
i=0
while [ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" != 1 ] && [ $i -lt 50 ]; do
	sleep 0.1
	i=$((i + 1))
done
# -s: keys only; -r: the host key baked in at build time (no generation, no entropy wait)
dropbear -s -p 22 -r /{host_key} -P /run/dropbear.pid
echo "{sshd_marker} $(cut -d' ' -f1 /proc/uptime) s"
exec /sbin/init
"""

# No console shell: the serial console is a log file. init only reaps and handles shutdown.
INITTAB = """::ctrlaltdel:/sbin/poweroff -f
::shutdown:/bin/sync
"""


def shared_libraries(binary: Path, root: Path = Path("/")) -> list[Path]:
    """The libraries and dynamic loader binary needs: as ldd resolves them on this host, or, for
    a binary under another architecture's sysroot `root`, as its loader would find them there."""
    if root != Path("/"):
        return foreign_libraries(binary, root)
    res = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise VmError(f"ldd {binary} failed: {res.stderr.strip()}")
    libs = []
    for line in res.stdout.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            libs.append(Path(m.group(1)))
        elif "not found" in line:
            raise VmError(f"{binary} needs a library that is not installed: {line.strip()}")
    return libs


# where Debian's loader looks with no ld.so.cache, under a sysroot (multiarch first)
_LIBRARY_DIRS = ("lib/{triplet}", "usr/lib/{triplet}", "lib", "usr/lib")


def _dynamic(binary: Path) -> tuple[str | None, list[str]]:
    """(the program interpreter, the NEEDED sonames) of an ELF file, by readelf (any
    architecture's)."""
    res = subprocess.run(["readelf", "-W", "-l", "-d", str(binary)], capture_output=True,
                         text=True, check=False)
    if res.returncode != 0:
        raise VmError(f"readelf {binary} failed: {res.stderr.strip()}")
    interp = re.search(r"\[Requesting program interpreter: (\S+)\]", res.stdout)
    return (interp.group(1) if interp else None,
            re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", res.stdout))


def _triplet(binary: Path) -> str:
    machine = subprocess.run(["readelf", "-h", str(binary)], capture_output=True, text=True,
                             check=False).stdout
    return "aarch64-linux-gnu" if "AArch64" in machine else "x86_64-linux-gnu"


def foreign_libraries(binary: Path, root: Path) -> list[Path]:
    """Every library binary (under sysroot root) needs, transitively, and its loader: paths under
    root, where the guest's loader will look for them."""
    dirs = [root / d.format(triplet=_triplet(binary)) for d in _LIBRARY_DIRS]
    found: dict[str, Path] = {}
    interp, todo = _dynamic(binary)
    libs: list[Path] = []
    if interp:
        libs.append(root / interp.lstrip("/"))
    while todo:
        name = todo.pop()
        if name in found:
            continue
        lib = next((d / name for d in dirs if (d / name).exists()), None)
        if lib is None:
            raise VmError(f"{binary.relative_to(root)} needs {name}, which is in none of "
                          f"{', '.join(str(d.relative_to(root)) for d in dirs)} under {root}")
        found[name] = lib
        libs.append(lib)
        todo.extend(_dynamic(lib.resolve())[1])
    return libs


def _add_binary(tree: Tree, binary: Path, root: Path = Path("/")) -> list[Path]:
    tree.copy(str(binary.relative_to(root)), binary, 0o755)
    libs = shared_libraries(binary, root)
    for lib in libs:
        # at the path ldd printed: the guest has no ld.so.cache, the loader's default dirs find them
        tree.copy(str(lib.relative_to(root)), lib, 0o755)
    return libs


def guest_tools(arch: str = "amd64") -> dict[str, str]:
    """GUEST_TOOLS as built for arch (Debian does not build every one everywhere)."""
    return {path: package for path, package in GUEST_TOOLS.items()
            if path not in NOT_PACKAGED.get(arch, ())}


def _add_tools(tree: Tree, root: Path, tools: Iterable[str]) -> None:
    libdirs: set[Path] = set()
    for path in tools:
        binary = root / path.lstrip("/")
        if not binary.is_file():
            raise VmError(f"{binary} is missing: apt-get install --no-install-recommends "
                          f"{GUEST_TOOLS[path]}")
        libdirs.update(lib.parent for lib in _add_binary(tree, binary, root)
                       if lib.name.startswith("libc.so"))
    for name in DLOPENED:
        lib = next((d / name for d in sorted(libdirs) if (d / name).is_file()), None)
        if lib is None:
            raise VmError(f"no {name} beside libc in {', '.join(map(str, sorted(libdirs)))}")
        tree.copy(str(lib.relative_to(root)), lib, 0o755)


def build(
    out: Path,
    *,
    release: str,
    nic_modules: list[Path],
    latency_modules: list[Path],
    host_key: Path,
    authorized_key: str,
    root: Path = Path("/"),
    arch: str = "amd64",
) -> int:
    """Write the cpio (uncompressed) to out; returns its size in bytes. root: where the guest's
    programs and libraries are (this host, or a sysroot of arch's packages)."""
    tree = Tree()
    for d in ("proc", "sys", "dev", "tmp", "run", "mnt", "var/log"):
        tree.dir(d)
    tree.symlink("var/run", "../run")
    # the kernel opens /dev/console for init before /init can mount devtmpfs
    tree.chardev("dev/console", 5, 1)
    tree.chardev("dev/null", 1, 3, 0o666)

    native = root == Path("/")
    tree.copy("bin/busybox", root / str(BUSYBOX).lstrip("/"), 0o755)
    if native:
        res = subprocess.run([str(BUSYBOX), "--list-full"], capture_output=True, text=True,
                             check=True)
        for applet in res.stdout.split():
            if applet == "bin/busybox":  # listed among its applets; a link would replace it
                continue
            depth = applet.count("/")
            tree.symlink(applet, "../" * depth + "bin/busybox")
    else:  # another architecture's busybox cannot list its applets here: it links them at boot
        tree.symlink("bin/sh", "busybox")
        for d in ("sbin", "usr/bin", "usr/sbin"):
            tree.dir(d)

    _add_binary(tree, root / str(DROPBEAR).lstrip("/"), root)
    sftp = root / str(SFTP_SERVER).lstrip("/")
    if sftp.is_file():
        _add_binary(tree, sftp, root)
        tree.symlink("usr/lib/sftp-server", "openssh/sftp-server")  # where Debian's dropbear looks
    _add_tools(tree, root, guest_tools(arch))

    tree.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
    tree.file("etc/group", b"root:x:0:\n")
    tree.file("etc/shells", b"/bin/sh\n")
    tree.file("etc/inittab", INITTAB.encode())
    tree.file("etc/hostname", b"irq-vm\n")
    # glibc's built-in files backend resolves localhost (stressapptest -n, stress-ng's socket
    # stressors)
    tree.file("etc/hosts",
              b"127.0.0.1 localhost irq-vm\n::1 localhost ip6-localhost ip6-loopback\n")
    tree.file("etc/nsswitch.conf", b"passwd: files\ngroup: files\nhosts: files\n")
    tree.dir("root", 0o700)
    tree.dir("root/.ssh", 0o700)
    tree.file("root/.ssh/authorized_keys", (authorized_key + "\n").encode(), 0o600)
    tree.dir("etc/dropbear", 0o700)
    tree.copy(HOST_KEY, host_key, 0o600)

    guest_nic = []
    for ko in nic_modules:
        path = f"lib/modules/{release}/{ko.name}"
        tree.copy(path, ko, 0o644)
        guest_nic.append("/" + path)
    for ko in latency_modules:
        tree.copy(f"{GUEST_MODULES}/{ko.name}", ko, 0o644)

    init = INIT.format(
        # existing files (procps' pgrep, util-linux's chrt) are kept: busybox does not overwrite
        install_applets="" if native else "/bin/busybox --install -s\n",
        init_marker=INIT_MARKER,
        sshd_marker=SSHD_MARKER,
        nic_modules=" ".join(guest_nic),
        host_key=HOST_KEY,
    )
    tree.file("init", init.encode(), 0o755)
    return tree.write(out)
