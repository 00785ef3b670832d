"""The history checker's invariants of durable waits (``docs/events-and-sleep.md``).

Inputs: the events the client sent (``send`` lines: the event's ``seq``, key,
payload and whether it went to one wait or to all), what each handler run saw
(``waited`` lines: the task, its attempt, the wait's name and the payload the run
got back; ``ended`` lines: a run that finished past its waits), and the final rows
of ``cairnq_waits`` and ``cairnq_waits_mailbox`` and of the tasks.

- EV-1, **an event is delivered to at most one completed wait per waiter**: a
  one-receiver event is the payload of at most one wait (of one task); every run of
  a task that went past a wait got the same payload there (a retry gets the
  payload back, never another event's); a fanout event reaches each task at most
  once.
- EV-2, **an event is never lost once sent (within retention)**: every event a
  send committed is, at the end, received by a wait, or still kept and unexpired;
  and no one-receiver event is kept while a wait on its key is parked for ever
  (that wait would never be woken by it).
- EV-3, **a send with an id is delivered at most once**: every send with one id got
  back one event (``seq``), and the mailbox holds one event with that send's payload
  (the scenario's payloads are unique per send, and its events are kept 7 days).
- SL-1, **a durable sleep never wakes early**: every sleep the runs went past was
  passed at a database time at or after its stored wake time.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .checker import Violation


@dataclass
class WaitsHistory:
    """What a waits run left behind."""

    events: list[dict[str, Any]]
    waits: list[dict[str, Any]]
    mailbox: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    now_ms: int
    quiescent: bool = True
    counters: dict[str, int] = field(default_factory=dict)


def check_waits(history: WaitsHistory) -> list[Violation]:
    """Every violation of EV-1, EV-2, EV-3 and SL-1 in ``history``."""
    return [*ev1(history), *ev2(history), *ev3(history), *sl1(history)]


def _of(events: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == kind]


def ev1(history: WaitsHistory) -> list[Violation]:
    found: list[Violation] = []
    sends = {int(e["seq"]): e for e in _of(history.events, "send")}
    # Every run past a wait got one payload there.
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for e in _of(history.events, "waited"):
        seen[(e["task"], e["name"])].add(repr(e["payload"]))
    for (task, name), payloads in sorted(seen.items()):
        if len(payloads) > 1:
            found.append(
                Violation(
                    "EV-1",
                    task,
                    f"runs past wait {name} got {len(payloads)} payloads",
                    sorted(payloads),
                )
            )
    # A one-receiver event is one wait's; a fanout one each task's once.
    receivers: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for row in history.waits:
        if row["state"] == "delivered" and row["message_seq"] is not None:
            receivers[int(row["message_seq"])].append((row["task_id"], row["name"]))
    for seq, got in sorted(receivers.items()):
        sent = sends.get(seq)
        fanout = bool(sent and sent["to"] == "all")
        tasks = [task for task, _ in got]
        if (not fanout and len(got) > 1) or len(set(tasks)) < len(tasks):
            found.append(
                Violation("EV-1", tasks[0], f"event {seq} was delivered to {len(got)} waits", got)
            )
    # The payload a run saw is the payload of the event its wait recorded.
    recorded = {(r["task_id"], r["name"]): r for r in history.waits}
    payload_of = {seq: repr(e["payload"]) for seq, e in sends.items()}
    for (task, name), payloads in sorted(seen.items()):
        row = recorded.get((task, name))
        if row is None or row["message_seq"] is None:
            continue
        expected = payload_of.get(int(row["message_seq"]))
        if expected is not None and payloads != {expected}:
            found.append(
                Violation("EV-1", task, f"wait {name} saw a payload not its event's", [payloads])
            )
    return found


def ev2(history: WaitsHistory) -> list[Violation]:
    found: list[Violation] = []
    kept = {int(m["seq"]): m for m in history.mailbox}
    received = {
        int(r["message_seq"])
        for r in history.waits
        if r["state"] == "delivered" and r["message_seq"] is not None
    }
    for e in _of(history.events, "send"):
        seq = int(e["seq"])
        message = kept.get(seq)
        if seq in received:
            continue
        if message is not None and int(message["expires_at_ms"]) > history.now_ms:
            continue
        found.append(Violation("EV-2", None, f"event {seq} on {e['key']!r} was lost", [e]))
    if not history.quiescent:
        return found
    live = {t["id"] for t in history.tasks if t["status"] in ("queued", "running")}
    untaken: dict[str, list[int]] = defaultdict(list)
    for m in history.mailbox:
        fresh = int(m["expires_at_ms"]) > history.now_ms
        if fresh and not _truthy(m["fanout"]) and m["taken_by"] is None:
            untaken[m["event_key"]].append(int(m["seq"]))
    for row in history.waits:
        if row["kind"] != "event" or row["state"] != "waiting" or row["task_id"] not in live:
            continue
        if untaken.get(row["event_key"]):
            found.append(
                Violation(
                    "EV-2",
                    row["task_id"],
                    f"wait {row['name']} stays parked while events "
                    f"{untaken[row['event_key']]} are kept for its key",
                )
            )
    return found


def ev3(history: WaitsHistory) -> list[Violation]:
    found: list[Violation] = []
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in _of(history.events, "send"):
        if e.get("id") is not None:
            by_id[e["id"]].append(e)
    events_of: dict[str, list[int]] = defaultdict(list)
    for m in history.mailbox:
        events_of[repr(json.loads(m["payload"]))].append(int(m["seq"]))
    for send_id, sends in sorted(by_id.items()):
        seqs = sorted({int(e["seq"]) for e in sends})
        stored = sorted(set(events_of.get(repr(sends[0]["payload"]), [])))
        if len(seqs) > 1 or len(stored) > 1:
            found.append(
                Violation(
                    "EV-3",
                    None,
                    f"send id {send_id!r} was delivered as {len(set(seqs) | set(stored))} events",
                    [seqs, stored],
                )
            )
    return found


def sl1(history: WaitsHistory) -> list[Violation]:
    found: list[Violation] = []
    for row in history.waits:
        if row["kind"] != "sleep" or row["state"] != "slept":
            continue
        if int(row["ended_at_ms"]) < int(row["wake_at_ms"]):
            early = int(row["wake_at_ms"]) - int(row["ended_at_ms"])
            found.append(
                Violation("SL-1", row["task_id"], f"sleep {row['name']} woke {early} ms early")
            )
    return found


def _truthy(value: Any) -> bool:
    return bool(value) and value not in (0, "0", "f", "false")
