"""A labgrid place as the bench's target: acquired through labgrid's own client (its gRPC
coordinator), its NetworkService the SSH endpoint, its PyVISADevice resources the instruments.

The station releases only a place it acquired itself: a place the user had already acquired is
used and left as it was. A claim file (one per coordinator and place, beside the station's other
state) records what the station acquired, so that `station cleanup` after a killed station can
release it, and only it (docs/lab.md)."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_COORDINATOR = "127.0.0.1:20408"  # labgrid's own default
CLAIMS_DIR = Path(os.environ.get("XDG_STATE_HOME",
                                 Path.home() / ".local" / "state")) / "irq-station" / "labgrid"


class PlaceError(Exception):
    """The place cannot be used: not there, held by someone else, missing a resource, or labgrid is
    absent."""


@dataclass(frozen=True)
class SshService:
    address: str
    port: int
    username: str


@dataclass
class PlaceResources:
    """What the station takes from an acquired place, and how it came to hold it."""

    place: str
    coordinator: str
    holder: str  # labgrid's "host/user" of the acquisition
    acquired_by_station: bool
    ssh: SshService
    visa: dict[str, str] = field(default_factory=dict)  # PyVISADevice name -> VISA resource string
    # exporter/group/class/name of every acquired resource
    resources: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        return {**asdict(self), "ssh": asdict(self.ssh)}

    def visa_resource(self, wanted: str) -> str:
        """`labgrid:NAME` (or `labgrid:` for the only one) as a VISA resource string."""
        name = wanted.partition(":")[2]
        if not self.visa:
            raise PlaceError(f"place {self.place} has no PyVISADevice (resources: "
                             f"{', '.join(self.resources)})")
        if not name:
            if len(self.visa) > 1:
                names = sorted(self.visa)
                raise PlaceError(f"place {self.place} has several PyVISADevice resources "
                                 f"({', '.join(names)}): name one, e.g. labgrid:{names[0]}")
            return next(iter(self.visa.values()))
        if name not in self.visa:
            raise PlaceError(f"place {self.place} has no PyVISADevice named {name!r} "
                             f"(it has: {', '.join(sorted(self.visa)) or 'none'})")
        return self.visa[name]


def coordinator_address(configured: str | None) -> str:
    return configured or os.environ.get("LG_COORDINATOR") or DEFAULT_COORDINATOR


def visa_string(params: dict[str, Any]) -> str:
    """A PyVISADevice's VISA resource: labgrid's driver opens TYPE::URL::INSTR; a URL that already
    ends in a resource class (a raw socket: ...::PORT::SOCKET) is taken as it is."""
    kind, url = str(params.get("type", "")), str(params.get("url", ""))
    if not kind or not url:
        raise PlaceError(f"a PyVISADevice without type or url: {params}")
    if url.upper().endswith(("::SOCKET", "::INSTR")):
        return f"{kind}::{url}"
    return f"{kind}::{url}::INSTR"


def _labgrid() -> Any:
    try:
        from labgrid.remote import client
    except ImportError as exc:
        raise PlaceError(
            f"a labgrid target needs labgrid ({exc}): pip install 'labgrid>=24'"
        ) from None
    return client


class PlaceSession:
    """One client session with the coordinator, on the caller's event loop."""

    def __init__(self, coordinator: str | None, place: str,
                 ssh_resource: str | None = None) -> None:
        self.coordinator = coordinator_address(coordinator)
        self.place = place
        self.ssh_resource = ssh_resource
        self._session: Any = None
        self._out = io.StringIO()  # labgrid's client prints its progress: kept, not shown

    async def __aenter__(self) -> PlaceSession:
        import asyncio

        client = _labgrid()
        args = argparse.Namespace(place=self.place, allow_unmatched=False, kick=False)
        self._session = client.ClientSession(self.coordinator, asyncio.get_running_loop(),
                                             args=args)
        try:
            with contextlib.redirect_stdout(self._out):
                await asyncio.wait_for(self._session.start(), 15)
        except Exception as exc:  # noqa: BLE001 - grpc's errors say little: say where
            await self._close()
            why = str(exc) or type(exc).__name__
            raise PlaceError(
                f"labgrid coordinator {self.coordinator} does not answer: {why}"
            ) from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    async def _close(self) -> None:
        if self._session is not None:
            with contextlib.suppress(Exception):
                await self._session.stop()
            with contextlib.suppress(Exception):
                await self._session.close()
            self._session = None

    @property
    def me(self) -> str:
        return f"{self._session.gethostname()}/{self._session.getuser()}"

    def place_state(self) -> Any:
        """The place as the coordinator last said (labgrid's Place)."""
        place = self._session.places.get(self.place)
        if place is None:
            known = ", ".join(sorted(self._session.places)) or "none"
            raise PlaceError(f"labgrid coordinator {self.coordinator} has no place {self.place!r} "
                             f"(places: {known})")
        return place

    def holder(self) -> str | None:
        return self.place_state().acquired

    async def claim(self, campaign: str) -> PlaceResources:
        """Acquire the place, or take it as the user acquired it; refuse one held by someone
        else."""
        client = _labgrid()
        place = self.place_state()
        ours = False
        if place.acquired and place.acquired != self.me:
            raise PlaceError(f"place {self.place} is acquired by {place.acquired} (labgrid "
                             f"coordinator {self.coordinator}); nothing was measured. Ask them to "
                             "release it, or wait")
        claim = read_claim(self.coordinator, self.place)
        # a station acquired it: a running one, or a killed one
        if place.acquired and claim is not None:
            if claim_is_live(claim):
                raise PlaceError(f"place {self.place} is in use by another station run (pid "
                                 f"{claim['pid']}, campaign {claim.get('campaign')!r}); nothing "
                                 "was measured")
            if claim_matches(claim, place):
                ours = True  # a killed station's acquisition: this one releases it
                write_claim(self.coordinator, self.place, campaign, self.me, place.changed)
            else:  # released and acquired again since, by you: yours, and the claim is stale
                drop_claim(self.coordinator, self.place)
        if not place.acquired:
            # the claim first: an acquisition the station makes is never unrecorded, whatever stops
            # it
            write_claim(self.coordinator, self.place, campaign, self.me, None)
            try:
                with contextlib.redirect_stdout(self._out):
                    await self._session.acquire()
            except client.Error as exc:
                drop_claim(self.coordinator, self.place)
                raise PlaceError(f"labgrid refused to acquire place {self.place}: {exc}") from None
            ours = True
            write_claim(self.coordinator, self.place, campaign, self.me, self.place_state().changed)
        try:
            return self.resources(acquired_by_station=ours)
        except BaseException:
            if ours:
                with contextlib.suppress(Exception):
                    await self.release()
            raise

    def resources(self, acquired_by_station: bool) -> PlaceResources:
        place = self.place_state()
        services: dict[str, dict[str, Any]] = {}
        visa: dict[str, str] = {}
        paths = []
        for path in place.acquired_resources:
            exporter, group, cls, name = path
            paths.append("/".join(path))
            entry = self._session.resources.get(exporter, {}).get(group, {}).get(name)
            if entry is None:
                raise PlaceError(f"place {self.place}: resource {'/'.join(path)} is gone (its "
                                 "exporter stopped?)")
            match = place.getmatch(path)
            shown = (match.rename if match is not None and match.rename else None) or name
            if cls == "NetworkService":
                services[shown] = entry.params
            elif cls in ("PyVISADevice", "NetworkPyVISADevice"):
                visa[shown] = visa_string(entry.params)
        return PlaceResources(self.place, self.coordinator, place.acquired or self.me,
                              acquired_by_station,
                              self._service(services), visa, paths)

    def _service(self, services: dict[str, dict[str, Any]]) -> SshService:
        if self.ssh_resource is not None:
            if self.ssh_resource not in services:
                raise PlaceError(f"place {self.place} has no NetworkService named "
                                 f"{self.ssh_resource!r} (it has: "
                                 f"{', '.join(sorted(services)) or 'none'})")
            params = services[self.ssh_resource]
        elif len(services) == 1:
            params = next(iter(services.values()))
        elif not services:
            raise PlaceError(f"place {self.place} has no NetworkService: the station reaches the "
                             "target over SSH")
        else:
            raise PlaceError(f"place {self.place} has several NetworkService resources "
                             f"({', '.join(sorted(services))}): name the target's with "
                             "ssh_resource")
        if (params.get("extra") or {}).get("proxy_required"):
            raise PlaceError(f"place {self.place}: its NetworkService is reachable only through "
                             "the exporter (labgrid's proxy): not supported by the station yet; "
                             "export an address it can reach")
        try:
            return SshService(str(params["address"]), int(params.get("port") or 22),
                              str(params["username"]))
        except (KeyError, ValueError, TypeError):
            raise PlaceError(f"place {self.place}: a NetworkService without a usable address, port "
                             f"and username: {params}") from None

    async def release(self) -> None:
        """Release the place (only ever called for a place the station acquired) and drop its
        claim."""
        client = _labgrid()
        try:
            with contextlib.redirect_stdout(self._out):
                await self._session.release()
        except client.Error as exc:
            raise PlaceError(f"labgrid refused to release place {self.place}: {exc}") from None
        drop_claim(self.coordinator, self.place)


# ---- claims: what the station acquired, for `station cleanup` after a kill
# --------------------------
def _claim_path(coordinator: str, place: str) -> Path:
    key = hashlib.sha256(f"{coordinator}\0{place}".encode()).hexdigest()[:16]
    return CLAIMS_DIR / f"{place}-{key}.json"


def write_claim(coordinator: str, place: str, campaign: str, holder: str,
                changed: float | None) -> None:
    """`changed`: the place's change time once the station acquired it (None: acquiring)."""
    path = _claim_path(coordinator, place)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"coordinator": coordinator, "place": place, "campaign": campaign,
                               "holder": holder,
                               "pid": os.getpid(), "acquired_at": time.time(), "changed": changed}))
    tmp.replace(path)


def claim_matches(claim: dict[str, Any], place: Any) -> bool:
    """Whether the place's present acquisition is the one the claim recorded: a place released and
    acquired again (by you, by hand) has changed since, and is not the station's to release."""
    changed = claim.get("changed")
    return changed is None or changed == getattr(place, "changed", None)


def read_claim(coordinator: str, place: str) -> dict[str, Any] | None:
    try:
        return json.loads(_claim_path(coordinator, place).read_text())
    except (OSError, ValueError):
        return None


def drop_claim(coordinator: str, place: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        _claim_path(coordinator, place).unlink()


def claim_is_live(claim: dict[str, Any]) -> bool:
    """Whether the station process that wrote the claim still runs (then cleanup leaves its
    place)."""
    pid = claim.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class PlaceCleanup:
    """`station cleanup` on a labgrid target: its target reached through the place, then the place
    released if a station that no longer runs acquired it (or cleanup itself had to); a place the
    user acquired stays theirs."""

    def __init__(self, coordinator: str | None, place: str, ssh_resource: str | None) -> None:
        self.coordinator, self.place, self.ssh_resource = (
            coordinator_address(coordinator), place, ssh_resource
        )
        self.release = False
        self.holder: str | None = None

    async def reach(self, settings: Any) -> Any:  # TargetSettings -> the same as an ssh target
        from station.target.ssh import TargetError

        try:
            async with PlaceSession(self.coordinator, self.place, self.ssh_resource) as session:
                holder, claim = session.holder(), read_claim(self.coordinator, self.place)
                if holder is not None and holder != session.me:
                    raise PlaceError(f"place {self.place} is acquired by {holder}: its target is "
                                     "theirs now, nothing was cleaned there")
                if claim is not None and claim_is_live(claim):
                    raise PlaceError(f"place {self.place} is in use by a running station (pid "
                                     f"{claim['pid']}): stop it first (it cleans up itself)")
                if holder is None:
                    found = await session.claim("station cleanup")
                else:
                    found = session.resources(acquired_by_station=claim is not None
                                              and claim_matches(claim, session.place_state()))
                self.release, self.holder = found.acquired_by_station, found.holder
        except PlaceError as exc:
            raise TargetError(f"labgrid: {exc}") from None
        return settings.model_copy(update={"kind": "ssh", "host": found.ssh.address,
                                           "port": found.ssh.port,
                                           "user": found.ssh.username})

    async def finish(self, clean: bool) -> str:
        """Release what a station acquired, once its target is clean; say what became of the
        place."""
        from station.target.ssh import TargetError

        if not self.release:
            return "left acquired by you (the station did not acquire it)"
        if not clean:
            return "kept acquired: its target could not be cleaned (run station cleanup again)"
        try:
            async with PlaceSession(self.coordinator, self.place) as session:
                if session.holder() == self.holder:
                    await session.release()
        except PlaceError as exc:
            raise TargetError(f"labgrid: {exc}") from None
        return "released"
