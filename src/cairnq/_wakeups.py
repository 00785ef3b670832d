"""In-process wake-ups: a settle or submit committed here wakes waiters here at once.

Every backend instance for the same database shares one hub (keyed by the
database's identity), so a client and a worker in one process need not share a
backend object. Wake-ups are accelerators only: a waiter always re-reads the
database, and polling remains the fallback.

A ``Subscription`` remembers that a matching event arrived since it was last
``clear()``-ed, so an event that lands between "look at the database" and
"start waiting" is not lost.

Cross-process events come from taps (a backend's LISTEN connection). The hub
counts which channels its subscriptions need, and a tap listens on those only
(and on a channel no longer needed for a short while after, so a run of waits
does not LISTEN and UNLISTEN each time). A subscription is *live* once every
tap that is connected delivers its channels; a waiter that wants no lost
wake-up waits for that (``until_live_async``) before it looks at the database.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from ._aio import wait_set
from ._events import CHANNELS, Emit

Match = Callable[[Emit], bool]
# How long a waiter lets a tap take to LISTEN before it looks anyway; going live
# later still wakes it, so this bounds a delay, not correctness.
LIVE_WAIT_S = 1.0
# A tap keeps a channel this long after its last subscription closed, so a run of
# waits does not LISTEN and UNLISTEN each time.
LISTEN_LINGER_S = 2.0


class Closable(Protocol):
    def close(self) -> None: ...


class Tap(Protocol):
    """A source of cross-process events (a LISTEN connection) that follows the demand."""

    def demand_changed(self) -> None:
        """The set of needed channels may have changed; called under the hub's lock."""


class Subscription:
    """A latch set by matching events; wait on it from a thread or from a loop."""

    def __init__(
        self,
        hub: WakeHub,
        match: Match,
        buffer: int = 0,
        claims: bool = False,
        channels: frozenset[str] = CHANNELS,
    ) -> None:
        self._hub = hub
        self._match = match
        self.claims = claims
        self.channels = channels
        self._live = threading.Event()
        self._live_waiter: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._events: collections.deque[Emit] | None = (
            collections.deque(maxlen=buffer) if buffer else None
        )
        self._flag = threading.Event()
        self._matched = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._async_flag: asyncio.Event | None = None
        # How many ``wait_async`` calls are suspended right now. A set from another
        # thread crosses into the loop only for them: a waiter that arrives later
        # finds ``_flag`` set, because it counts itself before it looks at the flag.
        self._waiting = 0

    def _deliver(self, emit: Emit) -> None:
        if self._match(emit):
            if self._events is not None:
                self._events.append(emit)
            self._matched = True
            self.set()

    def drain(self) -> list[Emit]:
        """The buffered events (``buffer=`` subscriptions), oldest first; empties the buffer."""
        if self._events is None:
            return []
        out = []
        while self._events:
            out.append(self._events.popleft())
        return out

    def set(self) -> None:
        """Set the latch directly (other wake sources: LISTEN, a file watcher, a poke)."""
        if not self._flag.is_set():  # Event.set takes a lock and notifies even when set
            self._flag.set()
        loop, flag = self._loop, self._async_flag
        if loop is not None and flag is not None:
            if asyncio._get_running_loop() is loop:
                flag.set()  # on the waiter's own loop: no self-pipe write, no extra turn
                return
            if not self._waiting:
                return
            # A closed loop raises RuntimeError: nobody is waiting there any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(flag.set)

    def clear(self) -> None:
        self._matched = False
        self._flag.clear()
        if self._async_flag is not None:
            self._async_flag.clear()

    def is_set(self) -> bool:
        return self._flag.is_set()

    def matched(self) -> bool:
        """Whether an event this subscription matches arrived since the last ``clear``.

        Unlike a poke or a timeout, a matching event says what happened (for a claim
        loop: a task was queued in one of its queues).
        """
        return self._matched

    def wait(self, timeout_s: float) -> bool:
        """Block until an event arrives or ``timeout_s`` passes; True if woken."""
        return self._flag.wait(timeout_s)

    async def wait_async(self, timeout_s: float) -> bool:
        """Wait on the running loop until an event arrives or ``timeout_s`` passes."""
        if self._async_flag is None:
            self._loop = asyncio.get_running_loop()
            self._async_flag = asyncio.Event()
        self._waiting += 1
        try:
            if self._flag.is_set():
                return True
            if await wait_set(self._async_flag, timeout_s):
                return True
            return self._flag.is_set()
        finally:
            self._waiting -= 1

    def _went_live(self) -> None:
        self._live.set()
        waiter = self._live_waiter
        if waiter is not None:
            loop, flag = waiter
            if asyncio._get_running_loop() is loop:
                flag.set()
            else:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(flag.set)

    def until_live(self, timeout_s: float) -> bool:
        """Block until the taps deliver this subscription's channels; False after ``timeout_s``.

        Events sent after this returns True wake the subscription. Without a
        connected tap it is live at once (polling, and the tap's poke when it
        connects, cover the rest).
        """
        return self._live.wait(timeout_s)

    async def until_live_async(self, timeout_s: float) -> bool:
        """``until_live`` on the running loop."""
        if self._live.is_set():
            return True
        flag = asyncio.Event()
        self._live_waiter = (asyncio.get_running_loop(), flag)
        if self._live.is_set():
            return True
        if await wait_set(flag, timeout_s):
            return True
        return self._live.is_set()

    def close(self) -> None:
        self._hub._remove(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WakeHub:
    """Fans committed events out to this process's subscriptions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: tuple[Subscription, ...] = ()
        self._watch_users = 0
        self._watch_start: Callable[[], Closable | None] | None = None
        self._watcher: Closable | None = None
        self._demand = dict.fromkeys(CHANNELS, 0)
        self._released_at = dict.fromkeys(CHANNELS, float("-inf"))
        self._taps: list[Tap] = []
        # Connected taps and the channels each delivers now.
        self._live: dict[Tap, frozenset[str]] = {}

    def subscribe(
        self,
        match: Match,
        *,
        buffer: int = 0,
        claims: bool = False,
        channels: Iterable[str] = CHANNELS,
    ) -> Subscription:
        """A latch for events ``match`` accepts; ``buffer`` > 0 also keeps the last events.

        ``claims`` marks a worker's claim loop, which ``poke(claimers_only=True)`` wakes.
        ``channels`` are the channels ``match`` can accept: taps listen on them
        while the subscription is open.
        """
        wanted = frozenset(channels) & CHANNELS
        sub = Subscription(self, match, buffer, claims, wanted)
        with self._lock:
            self._subs = (*self._subs, sub)
            if claims and self._watcher is None and self._watch_users:
                assert self._watch_start is not None
                self._watcher = self._watch_start()
            changed = False
            for channel in wanted:
                self._demand[channel] += 1
                changed = changed or self._demand[channel] == 1
            if self._delivered(wanted):
                sub._live.set()
            if changed:
                for tap in self._taps:
                    tap.demand_changed()
        return sub

    def _delivered(self, channels: frozenset[str]) -> bool:
        """Whether every connected tap delivers ``channels`` (true with none connected)."""
        return all(channels <= live for live in self._live.values())

    def add_tap(self, tap: Tap) -> None:
        """Let ``tap`` follow the demand (it reads it with ``channels_needed``)."""
        with self._lock:
            self._taps.append(tap)

    def remove_tap(self, tap: Tap) -> None:
        self.tap_down(tap)
        with self._lock:
            self._taps = [t for t in self._taps if t is not tap]

    def channels_needed(self, linger_s: float) -> tuple[frozenset[str], float | None]:
        """The channels to listen on, and when (monotonic) that set next shrinks.

        A channel stays needed ``linger_s`` after its last subscription closed.
        """
        now = time.monotonic()
        needed: set[str] = set()
        shrinks: float | None = None
        with self._lock:
            for channel in CHANNELS:
                if self._demand[channel]:
                    needed.add(channel)
                    continue
                until = self._released_at[channel] + linger_s
                if until > now:
                    needed.add(channel)
                    shrinks = until if shrinks is None else min(shrinks, until)
        return frozenset(needed), shrinks

    def tap_live(self, tap: Tap, channels: frozenset[str]) -> None:
        """``tap`` is connected and delivers ``channels``: subscriptions now covered go live.

        A subscription that goes live is also woken, so a waiter that looked at the
        database before the LISTEN took effect looks again. One no longer covered
        (a channel about to be dropped as it was subscribed again) stops being live
        until the channel is back, and is woken then.
        """
        woken = []
        with self._lock:
            self._live[tap] = channels
            for sub in self._subs:
                delivered = self._delivered(sub.channels)
                if sub._live.is_set() and not delivered:
                    sub._live.clear()
                elif delivered and not sub._live.is_set():
                    woken.append(sub)
        for sub in woken:
            sub._went_live()
            sub.set()

    def tap_down(self, tap: Tap) -> None:
        """``tap`` lost its connection: it no longer holds back any subscription."""
        with self._lock:
            if self._live.pop(tap, None) is None:
                return
            freed = [s for s in self._subs if not s._live.is_set() and self._delivered(s.channels)]
        for sub in freed:
            sub._went_live()

    def share_watcher(self, start: Callable[[], Closable | None]) -> Callable[[], None]:
        """Use one cross-process watcher, started by ``start``, while claim loops exist.

        Every open backend on this hub calls this once and calls the returned
        function when it closes; the watcher runs from the first claim loop's
        subscription until the last backend leaves, so a process that only
        submits never pays for one, and one process never runs two.
        """
        with self._lock:
            self._watch_start = start
            self._watch_users += 1
            if self._watcher is None and any(sub.claims for sub in self._subs):
                self._watcher = start()
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                self._watch_users -= 1
                watcher = self._watcher if self._watch_users == 0 else None
                if watcher is not None:
                    self._watcher = None
            if watcher is not None:
                watcher.close()

        return release

    def _remove(self, sub: Subscription) -> None:
        with self._lock:
            if sub not in self._subs:
                return
            self._subs = tuple(s for s in self._subs if s is not sub)
            released = False
            for channel in sub.channels:
                self._demand[channel] -= 1
                if not self._demand[channel]:
                    self._released_at[channel] = time.monotonic()
                    released = True
            if released:
                for tap in self._taps:
                    tap.demand_changed()

    def publish(self, emits: Iterable[Emit]) -> None:
        subs = self._subs
        if not subs:
            return
        for emit in emits:
            for sub in subs:
                sub._deliver(emit)

    def poke(self, *, claimers_only: bool = False) -> None:
        """Wake subscribers: something changed somewhere, look again.

        A file watcher sees every commit without knowing what it was, so it wakes
        only claim loops (one cheap probe each); waiters keep their own polling.
        """
        for sub in self._subs:
            if sub.claims or not claimers_only:
                sub.set()


_HUBS: dict[str, WakeHub] = {}
_HUBS_LOCK = threading.Lock()


def _forget_hubs_in_child() -> None:
    # A forked child has none of its parent's threads: no watcher, no subscriber.
    global _HUBS_LOCK
    _HUBS.clear()
    _HUBS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_hubs_in_child)


def hub_for(identity: str) -> WakeHub:
    """The process-wide hub for one database."""
    with _HUBS_LOCK:
        hub = _HUBS.get(identity)
        if hub is None:
            hub = _HUBS[identity] = WakeHub()
        return hub


def wants_queued(queues: Iterable[str]) -> Match:
    wanted = frozenset(queues)
    return lambda e: e.channel == "queued" and e.value in wanted


def wants_done(task_id: str) -> Match:
    return lambda e: e.channel == "done" and e.value == task_id
