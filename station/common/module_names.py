"""What the latency modules are called and where their records stream (target_modules/README.md):
one naming for the station's side (target/modules.py) and the twin that plays the modules."""

from __future__ import annotations

#: a kernel module parameter's name, as the campaign file and insmod's command line take it
MODULE_PARAM_NAME = r"[A-Za-z_][A-Za-z0-9_]{0,63}"

MODULE_STEMS = {
    ("rtai", "lpt"): "rtai_lpt_latency",
    ("rtai", "pcie"): "rtai_pcie_latency",
    ("mainline", "lpt"): "lpt_latency",
    ("mainline", "pcie"): "pcie_latency",
}


def module_stem(family: str, interface: str) -> str:
    return MODULE_STEMS[(family, interface)]


def stream_device(family: str, interface: str, fifo: int) -> str:
    return f"/dev/rtf{fifo}" if family == "rtai" else f"/dev/{module_stem(family, interface)}"


def vermagic(ko: bytes) -> str | None:
    """The vermagic string from a module's .modinfo section ("6.1.0-56-amd64 SMP ..."): its first
    word is the kernel release the module was built for, the one `uname -r` must print."""
    start = ko.find(b"vermagic=")
    if start < 0:
        return None
    end = ko.find(b"\0", start)
    return ko[start + len("vermagic=") : end if end >= 0 else None].decode(errors="replace")
