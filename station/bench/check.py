"""`station bench check`: walk a bench the way an experienced engineer would before a campaign,
and stop at the first thing that would block one, naming it and its fix.

The walk, in order: the bench's hosts come up (the target answers: address, key, host key;
the load hosts); sudo works without a password; the kernel is of the campaign's family; the
module files are there and were built for the running kernel (vermagic against `uname -r`);
then the campaign's kind checks its own measurement, briefly (the module kind: one second of
the module, its records at the period, the scope's pulses on the configured channel:
kinds/module/bench_check.py). Nothing is measured or stored; whatever is loaded or started is
undone on every exit path, as after a run.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from station import kind_registry
from station.bench.bench import Bench, BenchError, Messages
from station.common.module_names import vermagic
from station.config import Campaign, TargetSettings
from station.target import TargetError, modules
from station.target.ssh import TargetConnection


@dataclass(frozen=True)
class Finding:
    """One step of the walk: what it looked at, whether the bench passes it, what was seen, and
    (when it does not pass) the fix."""

    step: str  # target, sudo, kernel, modules, records, scope, record_span, pulses, …
    ok: bool
    said: str  # what was seen; for a failed step, the problem
    fix: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


class StopCheck(Exception):  # noqa: N818 - not an error: the walk has found what blocks the bench
    """Raised by `Checklist.add` on a failed step: the walk ends there."""


@dataclass
class Checklist:
    """The findings so far; a failed one ends the walk (the next steps would only fail after
    it, or say nothing a user can act on)."""

    findings: list[Finding] = field(default_factory=list)
    propose: bool = False  # asked for: the scope block a first look proposes (--propose)
    proposal: dict[str, Any] | None = None  # station/bench/proposal.py Proposal.as_dict()
    proposal_note: str = ""  # why there is none, when one was asked for

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)
        if not finding.ok:
            raise StopCheck(finding.step)

    def ok(self, step: str, said: str, **evidence: Any) -> None:
        self.add(Finding(step, True, said, evidence=evidence))

    def fail(self, step: str, said: str, fix: str, **evidence: Any) -> NoReturn:
        self.add(Finding(step, False, said, fix, evidence))
        raise AssertionError("unreachable: a failed finding stops the walk")


@dataclass
class BenchCheck:
    """The walk's result: ready only when every step passed and the kind checked its own."""

    campaign: str
    findings: list[Finding]
    seconds: float
    not_checked: list[str] = field(default_factory=list)  # what the walk could not look at
    twin: dict[str, Any] | None = None  # the twin's own summary (its truth) when it stood in
    proposal: dict[str, Any] | None = None  # the proposed bench.scope block (--propose)
    proposal_note: str = ""  # why none was proposed, when one was asked for

    @property
    def ready(self) -> bool:
        return bool(self.findings) and all(f.ok for f in self.findings)

    @property
    def blocking(self) -> Finding | None:
        return next((f for f in self.findings if not f.ok), None)

    def as_dict(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "ready": self.ready, "seconds": round(self.seconds, 1),
                "findings": [asdict(f) for f in self.findings], "not_checked": self.not_checked,
                "twin": self.twin, "proposal": self.proposal,
                "proposal_note": self.proposal_note}

    def text(self) -> str:
        lines = []
        for f in self.findings:
            lines.append(f"{'ok' if f.ok else 'NOT READY':>9}  {f.step}: {f.said}")
            if f.fix:
                lines.append(f"{'':>9}  fix: {f.fix}")
        lines += [f"{'-':>9}  not checked: {what}" for what in self.not_checked]
        verdict = ("ready: a campaign would run" if self.ready
                   else f"not ready: {self.blocking.step if self.blocking else 'nothing checked'}")
        lines.append(f"{verdict} ({self.seconds:.0f} s)")
        if self.proposal is not None:
            lines += ["", proposal_text(self.proposal)]
        elif self.proposal_note:
            lines.append(self.proposal_note)
        return "\n".join(lines)


# A kind's own check of its measurement: the active bench (its hosts up, instruments not yet
# opened) and the checklist to add its findings to (add raises StopCheck on a failed step).
KindCheck = Callable[[Bench, Checklist], Awaitable[None]]


def proposal_text(proposal: dict[str, Any]) -> str:
    """The proposed block as YAML to paste under `bench:`, with what it expects."""
    import yaml

    block = yaml.safe_dump({"scope": proposal["scope"]}, sort_keys=False,
                           default_flow_style=False, allow_unicode=True)
    tried = "; ".join(f"{t['capture']}: {100 * t['capture_ratio']:.2g} % ({t['cycle_s']:.3g} s "
                      f"a cycle)" for t in proposal["tried"])
    return (f"proposed bench.scope (expected capture ratio {100 * proposal['capture_ratio']:.2g} "
            f"%, {proposal['pulses_per_acquisition']:.0f} pulses an acquisition; tried {tried};"
            f" assumes {proposal['assumes']}):\n"
            + "".join(f"  {line}\n" for line in block.splitlines()))


async def check_bench(campaign: Campaign, log: Messages, target_name: str | None = None,
                      propose: bool = False) -> BenchCheck:
    """Walk the bench of `campaign` (one of its targets: `target_name`, None for bench.target
    or the first of bench.targets) and say whether a campaign would run on it. `propose`: also
    the bench.scope block for the pulses a first look sees (the kind's check takes it)."""
    started = time.monotonic()
    targets = campaign.bench.named_targets()
    name = target_name if target_name is not None else next(iter(targets))
    kind = kind_registry.kind(campaign.matrix.kind)
    checklist = Checklist(propose=propose)
    not_checked = [f"target {t!r}" for t in targets if t != name]
    bench = Bench(campaign, log, name, instruments=False)
    twin = None
    step = "target"  # where an error the steps do not catch themselves is reported
    try:
        try:
            await bench.activate()
        except BenchError as exc:
            checklist.fail("target", str(exc), _fix_for_unreachable(str(exc)))
        twin = bench.twin.ground_truth_summary() if bench.twin is not None else None
        assert bench.target is not None
        conn = await bench.target.live_connection()
        where = bench.target.endpoint.where
        checklist.ok("target", f"{where} answers ({bench.facts.get('uname', '?')})",
                     load_hosts=sorted(bench.load_hosts))
        step = "sudo"
        await _check_sudo(conn, checklist)
        step = "kernel"
        release = (await conn.run("uname -r")).stdout.strip()
        _check_family(bench.target_settings, bench.facts, release, checklist, kind.needs.family)
        step = "modules"
        if kind.needs.modules is not None:
            assert bench.wiring is not None
            settings = bench.wiring.target  # as its provider resolved it (a VM's own modules)
            stems = kind.needs.modules(campaign, settings)
            build = kind.needs.module_build(campaign) if kind.needs.module_build else None
            if build is not None and build.when != "never":  # as the campaign will: built here
                try:
                    settings = await bench.build_modules(settings, stems, build)
                except BenchError as exc:
                    checklist.fail("modules", str(exc), "give module.kdir (on the station) or "
                                   f"module.target_kdir (on the target): a kernel build tree for "
                                   f"{release} (docs/bench-bring-up.md)", release=release)
            await _check_module_files(bench, settings, conn, stems, release, checklist)
        step = "records"  # the kind's own steps name themselves; this is where they begin
        own = kind.load("bench_check")
        if own is None:
            not_checked.append(f"the {kind.name} kind's measurement (it declares no bench check)")
        else:
            await own(bench, checklist)
    except StopCheck:
        pass
    except (TargetError, BenchError) as exc:  # a step that failed in a way it did not foresee
        checklist.findings.append(Finding(step, False, str(exc), _fix_for_unreachable(str(exc))))
    finally:
        await bench.deactivate()
    note = checklist.proposal_note
    if propose and checklist.proposal is None and not note:
        note = "no proposal: the walk stopped before the scope was looked at"
    return BenchCheck(campaign.name, checklist.findings, time.monotonic() - started, not_checked,
                      twin, checklist.proposal, note)


def _fix_for_unreachable(problem: str) -> str:
    """What to do about a host that did not come up, by the words of station/target/ssh.py's
    errors (which already say what is wrong)."""
    text = problem.lower()
    if "host key" in text:
        return ("record the target's host key in the known_hosts file bench.target.known_hosts "
                "names (ssh-keyscan -p PORT HOST), after checking its fingerprint on the target")
    if "refused our key" in text or "identity file" in text or "key files" in text:
        return ("install the station's public key on the target (ssh-copy-id -i "
                "IDENTITY_FILE.pub USER@HOST), or correct bench.target.identity_file and user")
    if "cannot reach" in text or "no answer from" in text:
        return ("check bench.target.host and port, that the target is powered and on the "
                "network, and that its SSH server runs")
    return "the message names the part and why; fix it and check again"


async def _check_sudo(conn: TargetConnection, checklist: Checklist) -> None:
    if not conn.endpoint.sudo:
        checklist.ok("sudo", f"logged in as {conn.endpoint.user or 'root'}: no sudo needed")
        return
    try:
        await conn.run("true", privileged=True)
    except TargetError as exc:
        checklist.fail("sudo", str(exc), "log in as root, or give the station's user a sudoers "
                       "rule without a password (USER ALL=(root) NOPASSWD: ALL): it runs insmod, "
                       "rmmod, kill, cat, dmesg and its readers and loads (through setsid and sh) "
                       "as root (docs/bench-bring-up.md)")
    checklist.ok("sudo", "sudo -n works without a password")


def _check_family(settings: TargetSettings, facts: dict[str, str], release: str,
                  checklist: Checklist, matters: bool = True) -> None:
    """The kernel's flavour against bench.target.family, when the kind's modules are the
    family's builds (`matters`); else only said."""
    rtai = not facts.get("rtai", "unavailable").startswith("unavailable")
    preempt_rt = facts.get("realtime", "") == "1"
    flavour = "RTAI" if rtai else "PREEMPT_RT" if preempt_rt else "mainline (not PREEMPT_RT)"
    evidence = {"release": release, "rtai": rtai, "preempt_rt": preempt_rt}
    if not matters:
        checklist.ok("kernel", f"{release}, {flavour} (this kind's modules are not "
                     "bench.target.family's)", **evidence)
        return
    if settings.family == "rtai" and not rtai:
        checklist.fail("kernel", f"bench.target.family is rtai, but the target runs {release}, "
                       f"{flavour}, without RTAI (no /proc/rtai/hal)",
                       "boot the target's RTAI kernel (and load rtai_hal, rtai_sched, rtai_fifos), "
                       "or set bench.target.family: mainline for its mainline modules", **evidence)
    if settings.family == "mainline" and rtai:
        checklist.fail("kernel", f"bench.target.family is mainline, but the target runs RTAI "
                       f"({release}): RTAI takes the interrupt before Linux",
                       "set bench.target.family: rtai for the RTAI modules", **evidence)
    checklist.ok("kernel", f"{release}, {flavour}: family {settings.family}", **evidence)


async def _check_module_files(bench: Bench, settings: TargetSettings, conn: TargetConnection,
                              stems: set[str], release: str, checklist: Checklist) -> None:
    """Each module file the campaign loads, built for the running kernel: read from the station's
    copy when bench.target.upload_modules names one (then uploaded, as a campaign would), else
    from the target's own file."""
    assert bench.target is not None
    built_for: dict[str, str | None] = {}
    for stem in sorted(stems):
        if settings.upload_modules:
            path = Path(settings.upload_modules).expanduser() / f"{stem}.ko"
            if not path.is_file():
                checklist.fail("modules", f"{path} does not exist (bench.target.upload_modules)",
                               _build_fix(release), release=release)
            magic = vermagic(path.read_bytes())
            where = str(path)
        else:
            where = f"{settings.module_dir.rstrip('/')}/{stem}.ko"
            there, magic = await modules.file_vermagic(conn, where)
            if not there:
                checklist.fail("modules", f"{where} is not on the target",
                               f"{_build_fix(release)}, then copy it to {where} (or set "
                               "bench.target.upload_modules to the directory holding it: the "
                               "station uploads it)", release=release)
        built_for[stem] = magic.split()[0] if magic else None
        if built_for[stem] != release:
            checklist.fail("modules", f"{where} was built for kernel "
                           f"{built_for[stem] or '(no vermagic)'}, but the target runs {release}: "
                           "insmod would refuse it (Invalid module format)",
                           _build_fix(release), release=release, built_for=built_for)
    if settings.upload_modules:
        try:
            await bench._upload_modules(settings, stems)
        except BenchError as exc:
            checklist.fail("modules", str(exc), "the target's words are above: module_dir must "
                           "be writable by the station's user", release=release)
    checklist.ok("modules", f"{', '.join(sorted(stems))} built for {release}", release=release,
                 built_for=built_for)


def _build_fix(release: str) -> str:
    return (f"`station modules build` builds the mainline modules for {release} (or "
            "module.build: auto in the campaign; by hand: make -C target_modules "
            f"KDIR=/lib/modules/{release}/build, target_modules/README.md; RTAI: its own "
            "Makefile)")
