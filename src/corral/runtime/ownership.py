"""One owner per run: take, renew and release a run's lease while a process drives it.

The lease lives in the store; every save of the run is fenced by it (see ``Store.save``).
Here is what a driving process does around that: wait for a busy run or take over a
dead owner's, keep the lease alive with a heartbeat while a step runs long, and give it
up when the drive ends.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Any

from corral.errors import LeaseLostError, RunBusyError, StoreError
from corral.store.base import Lease, LeaseHolder, Store

StoreCall = Callable[..., Awaitable[Any]]
"""Runs a blocking store method off the event loop: ``await io(store.method, *args)``."""


def _stat_fields(pid: int) -> list[str]:
    """``/proc/PID/stat`` after the command name (state first), or ``[]`` if unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return []
    return stat.rpartition(")")[2].split()


def process_started(pid: int) -> str:
    """When process ``pid`` started, in clock ticks since boot (``?`` if unknown)."""
    fields = _stat_fields(pid)
    return fields[19] if len(fields) > 19 else "?"


def process_ended(pid: int) -> bool:
    """Whether ``pid`` is a process that has exited but was not yet reaped (a zombie).

    It can no longer act: a killed worker whose parent has not waited for it yet must not
    hold its runs' leases until they expire.
    """
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] in ("Z", "X")


def process_space() -> str:
    """The host and pid namespace: where a pid names one process."""
    try:
        namespace = os.readlink("/proc/self/ns/pid").replace(":", "")  # "pid[4026531836]"
    except OSError:
        namespace = "?"
    return f"{socket.gethostname()}/{namespace}"


def owner_gone(owner: str) -> bool:
    """Whether a lease ``owner`` is a process of this host that no longer exists.

    Its lease would otherwise keep the run busy until it expires; on the same host we can
    see that the process is gone (or its pid taken by a newer one). Another host's owner
    is never taken for gone.
    """
    space, _, rest = owner.partition(":")
    pid_text, _, started = rest.partition(":")[0].partition(".")
    if space != process_space() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # a process of another user has that pid: compare start times
    now_started = process_started(pid)
    if started and now_started != "?" and started != now_started:
        return True  # the pid was reused by a newer process
    return process_ended(pid)  # killed, not yet reaped by its parent


@dataclass(slots=True)
class Held:
    """A lease held for one drive, and whether its last save released it."""

    lease: Lease
    released: bool = False
    earlier_owner_may_live: bool = False
    """Taken over from an owner whose lease expired but whose death was not proven."""
    left_to_expire: bool = False
    """Not released at the end: a write of the stopped drive may still act (a thread
    outlives a cancel), so whoever takes the run over must know the owner may live."""


class Ownership:
    """The leases one ``Runtime`` takes on runs of its store."""

    def __init__(
        self, store: Store, io: StoreCall, ttl_s: float, release: StoreCall | None = None
    ) -> None:
        self.store = store
        self.io = io
        self.ttl_s = ttl_s
        self._release = release
        """Gives a drive's lease back at its end (default: ``store.release_lease`` by ``io``)."""
        self._process: tuple[int, str] | None = None
        """(pid, ``host/namespace:pid.start``): read once per process, not once per run."""
        self._nonce = uuid.uuid4().hex[:6]
        """Tells this runtime's drives from another's in the same process (two runtimes on
        one store); within it, a counter does (no random draw per run)."""
        self._drives = itertools.count(1)
        self._heartbeats: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Heartbeats] = (
            weakref.WeakKeyDictionary()
        )
        """The first renewals of the leases held on each event loop that drives runs: loops
        may take turns on one runtime (threads, or ``asyncio.run`` per chat turn), and a
        loop that goes away takes its entry (and its timer) with it."""

    async def release(self, lease: Lease) -> None:
        """Give ``lease`` back: the end of a drive that did not release it with its last save."""
        if self._release is not None:
            await self._release(lease)
        else:
            await self.io(self.store.release_lease, lease)

    def owner(self) -> str:
        """A lease owner token: unique per drive, readable in a ``RUN_BUSY`` message.

        ``host/pid-namespace:pid.start:nonce.n``: a pid means something only in its
        namespace (containers may share a host name) and only while the process that had
        it lives (``start``, its start time, tells a reused pid apart).
        """
        pid = os.getpid()
        if self._process is None or self._process[0] != pid:  # a forked child reads its own
            self._process = (pid, f"{process_space()}:{pid}.{process_started(pid)}")
        return f"{self._process[1]}:{self._nonce}.{next(self._drives)}"

    def holding(self, run_id: str, wait_s: float, *, new_run: bool = False) -> Holding:
        """Hold the run's lease (heartbeat included) for an ``async with`` block.

        A new run's lease is taken by its first save (nobody else knows the id yet), and
        the last save of a drive releases it, so a run that ends in one go pays for no
        lease round trip of its own.
        """
        return Holding(self, Held(Lease(run_id, self.owner(), self.ttl_s, new_run=new_run)), wait_s)

    def heartbeats(self, loop: asyncio.AbstractEventLoop) -> Heartbeats:
        """The timer of ``loop``'s held leases: one per loop, kept while the loop lives."""
        beats = self._heartbeats.get(loop)
        if beats is None:
            beats = self._heartbeats[loop] = Heartbeats()
        return beats

    async def take(self, held: Held, wait_s: float) -> None:
        """Acquire the lease of an existing run, waiting up to ``wait_s`` while it is busy."""
        lease = held.lease
        run_id = lease.run_id
        deadline = time.monotonic() + max(wait_s, 0.0)
        pause = 0.05
        while True:
            try:
                replaced = await self._acquire(lease)
                held.earlier_owner_may_live = replaced is not None
                return
            except RunBusyError:
                dead = await self._dead_local_owner(run_id)
                if dead is not None:
                    await self._acquire(lease, dead)
                    return
                if time.monotonic() + pause > deadline:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)

    async def _acquire(self, lease: Lease, replacing: str | None = None) -> str | None:
        """``Store.acquire_lease``; a cancel gives back the lease the store took meanwhile.

        The store call runs on in its thread after a cancel; a lease it took then would
        keep the run busy (``RUN_BUSY``) for a whole lease time with nobody driving it.
        """
        call = asyncio.ensure_future(
            self.io(partial(self.store.acquire_lease, lease, replacing=replacing))
        )
        try:
            replaced: str | None = await asyncio.shield(call)
        except asyncio.CancelledError:
            with suppress(Exception, asyncio.CancelledError):
                await call
                await asyncio.shield(self.io(self.store.release_lease, lease))
            raise
        return replaced

    async def _dead_local_owner(self, run_id: str) -> str | None:
        """The lease owner when it is a process of this host that no longer exists.

        A crashed process's lease would otherwise block recovery until it expires; on the
        same host we can see that its process is gone. Other hosts wait for the expiry.
        """
        holder: LeaseHolder | None = await self.io(self.store.lease_holder, run_id)
        if holder is None or not owner_gone(holder.owner):
            return None
        return holder.owner

    async def heartbeat(self, held: Held) -> None:
        """Renew the lease now and every third of its time to live; stop once it is lost.

        It reads ``held.lease`` each time: after a new run's first save the lease no
        longer creates its row, and a renewal must not either.
        """
        while True:
            try:
                await self.io(self.store.renew_lease, held.lease)
            except LeaseLostError:
                return
            except StoreError:
                pass  # a blip: the fence on the next save decides
            await asyncio.sleep(held.lease.ttl_s / 3)


class Heartbeats:
    """One timer for the first renewal of every lease held on one event loop.

    A lease is renewed a third of its time to live after it was taken, then by a task
    of its own (``Ownership.heartbeat``) until the drive ends. Most drives end long
    before that: a timer per drive would be made and cancelled for nothing on every run,
    so the held leases share one, set for the earliest one due. When nothing is held the
    timer, once it fires, is not set again.

    It refers to its loop only through the running loop and a weak reference to its
    timer: ``Ownership`` keys it by the loop weakly, and a strong reference from here
    would keep every loop that ever drove a run (and its entry) alive.
    """

    __slots__ = ("_timer", "_timer_due", "due")

    def __init__(self) -> None:
        self.due: dict[Holding, float] = {}
        """Held leases not renewed yet -> when their first renewal is due (loop time)."""
        self._timer: weakref.ref[asyncio.TimerHandle] | None = None
        """The pending timer, None once it ran. The loop holds it until it runs; if the loop
        closes first, this object goes with the loop's entry in ``Ownership``."""
        self._timer_due = 0.0

    def add(self, holding: Holding, loop: asyncio.AbstractEventLoop) -> None:
        """Renew ``holding``'s lease a third of its time to live from now, if still held.

        ``loop`` is the running loop, this timer's (the caller has it at hand already).
        """
        due = loop.time() + holding.held.lease.ttl_s / 3
        self.due[holding] = due
        if self._timer is None or due < self._timer_due:
            timer = self._timer() if self._timer is not None else None
            if timer is not None:
                timer.cancel()
            self._set(loop, due)

    def discard(self, holding: Holding) -> None:
        """The drive ended: nothing to renew (its timer, shared, stays for the others)."""
        self.due.pop(holding, None)

    def _set(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        self._timer, self._timer_due = weakref.ref(loop.call_at(due, self._tick)), due

    def _tick(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time() + 0.001  # the loop runs a timer up to its clock resolution early
        upcoming: float | None = None
        for holding, due in list(self.due.items()):
            if due <= now:
                del self.due[holding]
                holding.beat()
            elif upcoming is None or due < upcoming:
                upcoming = due
        if upcoming is not None:
            self._set(loop, upcoming)


class Holding:
    """The ``async with`` block of ``Ownership.holding``: the lease, its heartbeat, release.

    A plain class rather than a generator-based context manager: every run enters one.
    """

    __slots__ = ("_beats", "_heartbeats", "_lease", "_owners", "_wait_s", "held")

    def __init__(self, owners: Ownership, held: Held, wait_s: float) -> None:
        self._owners = owners
        self.held = held
        self._lease = held.lease
        """The lease as taken: a new run's is replaced once its row exists; same owner."""
        self._wait_s = wait_s
        self._beats: list[asyncio.Task[None]] = []
        self._heartbeats: Heartbeats | None = None

    async def __aenter__(self) -> Held:
        held = self.held
        if not held.lease.new_run:
            await self._owners.take(held, self._wait_s)
        loop = asyncio.get_running_loop()
        self._heartbeats = self._owners.heartbeats(loop)
        self._heartbeats.add(self, loop)
        return held

    def beat(self) -> None:
        """Renew the lease now and from then on, in a task, until the block ends."""
        self._beats.append(asyncio.ensure_future(self._owners.heartbeat(self.held)))

    async def __aexit__(self, *exc_info: object) -> None:
        if self._heartbeats is not None:
            self._heartbeats.discard(self)
        for beat in self._beats:
            beat.cancel()
        held = self.held
        if not (held.released or held.left_to_expire):
            with suppress(StoreError):  # it expires by itself; the outcome is decided
                await self._owners.release(self._lease)
