"""The conformance runner: executes protocol scenarios (JSON) against a real database.

A scenario is ``{name, description, steps}``; each step runs one protocol
operation (``submit``, ``claim``, ``fail``, ...), may ``save`` its result under an
alias, and may carry expectations. Every scenario runs in a fresh, isolated
store: a new temporary SQLite file, or a new PostgreSQL schema that is dropped
afterwards, so an existing database is never touched.

By default time is a ``FakeClock`` and ``sleep`` steps advance it, which keeps
lease-expiry scenarios exact; ``real_clock=True`` really sleeps instead.

``via`` picks the layer the steps go through:

- ``"client"`` (default): the async ``CairnQ``'s public methods (``submit``,
  ``get``, ``cancel``, ``retry``, ``purge``, ...), and ``cq.store`` for the
  worker's side (``claim``, ``heartbeat``, ``progress``, ``complete``, ``fail``),
  which the client has no methods for;
- ``"store"``: the store layer's methods (``TaskStore.claim``, ``.heartbeat``,
  ``.fail``, ...) for every step, the store finding each lease itself from the
  worker id;
- ``"ops"``: the protocol operations themselves, one transaction each, with the
  leases the interpreter keeps (the layer under both).

Example::

    results = run_paths(["scenarios/"], "sqlite:///unused.db", via="store")
    assert all(r.passed for r in results)

or ``python -m cairnq conformance scenarios/ --db postgresql://localhost/test --via store``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO, TypeVar

from . import kernel
from ._clock import Clock
from ._json import DEFAULT_CODEC, parse_input
from .backends import Backend, registration, url_scheme
from .backends.base import home_loop_of
from .client import CairnQ
from .errors import CairnQError, InvalidArgument
from .models import Lease, Task, TaskRef
from .protocol.steps import Op
from .store import TaskStore
from .testing import FakeClock

__all__ = ["VIAS", "ScenarioResult", "load_scenarios", "run_paths", "run_scenario"]

T = TypeVar("T")

Via = Literal["client", "store", "ops"]
VIAS: tuple[Via, ...] = ("client", "store", "ops")
_Runner = Callable[[Coroutine[Any, Any, Any]], Any]


@dataclass(frozen=True)
class ScenarioResult:
    """The outcome of one scenario: ``passed``, or the first failing step and why."""

    name: str
    passed: bool
    detail: str = ""
    path: str = ""


class StepFailed(Exception):
    """A step did not do what the scenario expected."""


def load_scenarios(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[Path, dict[str, Any]]]:
    """Scenario files from files and directories (every ``*.json`` inside), sorted by name."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(path.glob("*.json")))
        elif path.is_file():
            files.append(path)
        else:
            raise InvalidArgument(f"no scenario file or directory at {str(path)!r}")
    out = []
    for file in files:
        try:
            data = parse_input(file.read_text(encoding="utf-8"), what="the file")
        except (OSError, ValueError) as exc:
            raise InvalidArgument(f"cannot read scenario {str(file)!r}: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            raise InvalidArgument(f"{str(file)!r} is not a scenario (no steps list)")
        out.append((file, data))
    return out


BackendFactory = Callable[[Clock | None], contextlib.AbstractContextManager[Backend]]


def factory_for(url: str) -> BackendFactory:
    """Fresh isolated backends for the database ``url`` names: its backend's scratch
    databases (a temporary SQLite file; a throwaway schema of that PostgreSQL database).

    Raises:
        InvalidArgument: no backend is registered for the URL's scheme, or it has
            no scratch databases.
    """
    text = os.fspath(url)
    entry = registration(url_scheme(text))
    if entry is None or entry.scratch is None:
        raise InvalidArgument(
            f"cannot run scenarios on {url_scheme(text) or 'a file path'!r}: its backend "
            "offers no scratch database"
            if entry is not None
            else f"unsupported database URL scheme {url_scheme(text)!r}"
        )
    scratch = entry.scratch
    return lambda clock: scratch(text, clock)


def run_paths(
    paths: Sequence[str | os.PathLike[str]],
    url: str,
    *,
    real_clock: bool = False,
    out: TextIO | None = None,
    via: Via = "client",
) -> list[ScenarioResult]:
    """Run every scenario found under ``paths`` against ``url``'s backend.

    Writes one line per scenario and a closing ``N passed, M failed`` line to
    ``out`` when given. ``via`` picks the layer the steps go through (see the module).

    Raises:
        InvalidArgument: an unknown ``via``, or a URL without scratch databases.
    """
    _check_via(via)
    factory = factory_for(url)
    results = []
    for path, scenario in load_scenarios(paths):
        result = run_scenario(scenario, factory, real_clock=real_clock, path=str(path), via=via)
        results.append(result)
        if out is not None:
            mark = "PASS" if result.passed else "FAIL"
            line = f"{mark} {result.name}"
            out.write(line + (f": {result.detail}" if result.detail else "") + "\n")
    if out is not None:
        failed = sum(not r.passed for r in results)
        out.write(f"{len(results) - failed} passed, {failed} failed\n")
    return results


def run_scenario(
    scenario: dict[str, Any],
    factory: BackendFactory,
    *,
    real_clock: bool = False,
    path: str = "",
    via: Via = "client",
) -> ScenarioResult:
    """Run one scenario in a fresh store; never raises for a failing step.

    Raises:
        InvalidArgument: an unknown ``via``.
    """
    _check_via(via)
    name = str(scenario.get("name") or Path(path).stem or "unnamed")
    clock = None if real_clock else FakeClock()
    try:
        with factory(clock) as backend:
            if via == "ops":
                _Interpreter(backend, clock).run(scenario["steps"])
            else:
                _run_on_loop(backend, clock, scenario["steps"], via)
    except StepFailed as exc:
        return ScenarioResult(name, False, str(exc), path)
    except Exception as exc:
        return ScenarioResult(name, False, f"{type(exc).__name__}: {exc}", path)
    return ScenarioResult(name, True, "", path)


def _check_via(via: str) -> None:
    if via not in VIAS:
        raise InvalidArgument(f"via must be one of {', '.join(VIAS)}; got {via!r}")


def _run_on_loop(
    backend: Backend, clock: FakeClock | None, steps: list[dict[str, Any]], via: Via
) -> None:
    """Run the steps through the client or the store over ``backend``, on a loop of their own.

    A backend bound to an event loop running on another thread (an executor's home
    loop) gets the steps' coroutines on that loop instead.
    """
    kind = _ClientInterpreter if via == "client" else _StoreInterpreter
    home = home_loop_of(backend)
    if home is not None:
        kind(backend, clock, _on_home_loop(home)).run(steps)
        return
    loop = asyncio.new_event_loop()
    try:
        kind(backend, clock, loop.run_until_complete).run(steps)
    finally:
        # The backend's async connections belong to this loop: close them on it.
        with contextlib.suppress(Exception):
            loop.run_until_complete(backend.aclose())
        loop.close()


def _on_home_loop(loop: asyncio.AbstractEventLoop) -> _Runner:
    def run(work: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(work, loop).result()

    return run


def _plain(value: Any) -> Any:
    if isinstance(value, Task):
        return value.to_dict()
    if isinstance(value, TaskRef):
        return {"id": value.id, "status": value.status}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class _Interpreter:
    def __init__(self, backend: Backend, clock: FakeClock | None) -> None:
        self.backend = backend
        self.clock = clock
        self.saved: dict[str, Any] = {}
        self.leases: dict[str, Lease] = {}

    # --- references ---------------------------------------------------------------

    def resolve(self, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("$"):
            return self.lookup(value)
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        return value

    def lookup(self, ref: str) -> Any:
        alias, *path = ref[1:].split(".")
        if alias not in self.saved:
            raise StepFailed(f"reference {ref} names nothing saved")
        current = self.saved[alias]
        for part in path:
            if current is None:
                return None
            if isinstance(current, list):
                index = int(part)
                current = current[index] if index < len(current) else None
            elif isinstance(current, dict):
                current = current.get(part)
            else:
                return None
        return current

    # --- steps --------------------------------------------------------------------

    def run(self, steps: list[dict[str, Any]]) -> None:
        for index, step in enumerate(steps, 1):
            op = step.get("op")
            try:
                self.step(step)
            except StepFailed as exc:
                raise StepFailed(f"step {index} ({op}): {exc}") from None

    def step(self, step: dict[str, Any]) -> None:
        op = step["op"]
        if op == "expect":
            self.check(self.lookup(step["target"]), step)
            return
        args = self.resolve(step.get("args") or {})
        expected_error = step.get("expectError")
        try:
            result = _plain(self.perform(op, args))
        except CairnQError as exc:
            if expected_error is None:
                raise
            names = {cls.__name__ for cls in type(exc).__mro__}
            if expected_error not in names:
                raise StepFailed(f"expected {expected_error}, got {type(exc).__name__}") from None
            if "save" in step:
                self.saved[step["save"]] = {
                    "task_id": getattr(exc, "task_id", None),
                    "type": type(exc).__name__,
                }
            return
        if expected_error is not None:
            raise StepFailed(f"expected {expected_error}, but the step succeeded")
        if "save" in step:
            self.saved[step["save"]] = result
        if isinstance(step.get("expect"), dict):
            self.check(result, step["expect"])

    def check(self, actual: Any, spec: dict[str, Any]) -> None:
        if "length" in spec:
            size = len(actual) if isinstance(actual, (list, dict)) else None
            if size != spec["length"]:
                raise StepFailed(f"expected length {spec['length']}, got {size}")
        if "equals" in spec:
            for key, want in spec["equals"].items():
                got = actual.get(key) if isinstance(actual, dict) else None
                if got != want:
                    raise StepFailed(f"expected {key}={want!r}, got {got!r}")
        for key in spec.get("notNull", []):
            if (actual.get(key) if isinstance(actual, dict) else None) is None:
                raise StepFailed(f"expected {key} to be set, got null")
        for key in spec.get("isNull", []):
            got = actual.get(key) if isinstance(actual, dict) else None
            if got is not None:
                raise StepFailed(f"expected {key} to be null, got {got!r}")
        if "equalsRef" in spec:
            want = self.resolve(spec["equalsRef"])
            if actual != want:
                raise StepFailed(f"expected {want!r}, got {actual!r}")
        if "notEqualsRef" in spec:
            other = self.resolve(spec["notEqualsRef"])
            if actual == other:
                raise StepFailed(f"expected a value other than {other!r}")
        if "greaterThanRef" in spec:
            low = self.resolve(spec["greaterThanRef"])
            if actual is None or low is None or not actual > low:
                raise StepFailed(f"expected more than {low!r}, got {actual!r}")

    # --- operations ---------------------------------------------------------------

    def _run(self, op: Op[Any], write: bool = True) -> Any:
        return self.backend.run(op, write=write)

    def _owned_write(self, op: Op[Mapping[str, Any]]) -> dict[str, Any]:
        return Task.from_row(self._run(op)).to_dict()

    def _lease(self, task_id: str) -> Lease:
        """The lease of the scenario's latest claim of the task (a never-claimed one holds none).

        Nonce 0 names no claim in practice (nonces are 64 random bits), so a write with it
        is refused as a stranger's.
        """
        lease = self.leases.get(task_id)
        if lease is None:
            task = self._run(kernel.get(task_id), write=False)
            return Lease(task_id, task.attempt if task is not None else 0, 0)
        return lease

    def perform(self, op: str, a: dict[str, Any]) -> Any:
        if op == "sleep":
            if self.clock is not None:
                self.clock.advance(int(a["ms"]))
            else:
                time.sleep(int(a["ms"]) / 1000)
            return None
        if op == "submit":
            delay = a.get("run_at_delay_ms", a.get("delay_ms", 0))
            spec = kernel.new_task(
                DEFAULT_CODEC,
                a["name"],
                a.get("payload"),
                key=a.get("key"),
                queue=a.get("queue", "default"),
                conflict=a.get("conflict", "reuse"),
                max_attempts=a.get("max_attempts", 3),
                priority=a.get("priority", 0),
                metadata=a.get("metadata"),
                delay_ms=delay,
                parent_id=a.get("parent_id"),
                root_id=a.get("root_id"),
                correlation_id=a.get("correlation_id"),
            )
            return self._run(kernel.submit(spec))
        reads: dict[str, Callable[[str], Op[Any]]] = {
            "get": kernel.get,
            "get_status": kernel.get_status,
            "get_by_key": kernel.get_by_key,
            "get_status_by_key": kernel.get_status_by_key,
        }
        if op in reads:
            return self._run(reads[op](a["key"] if "key" in op else a["id"]), write=False)
        if op == "list":
            filters = {k: a[k] for k in a if k != "op"}
            return self._run(kernel.list_tasks(**filters), write=False)
        if op == "cancel":
            return self._run(kernel.cancel(a["id"]))
        if op == "cancel_by_key":
            return self._run(kernel.cancel_by_key(a["key"]))
        if op == "retry":
            return self._run(kernel.retry(a["id"], bool(a.get("reset_attempt", False))))
        if op == "retry_by_key":
            return self._run(kernel.retry_by_key(a["key"], bool(a.get("reset_attempt", False))))
        if op == "purge":
            return self._run(
                kernel.purge(
                    older_than_ms=a.get("older_than_ms", 0),
                    queue=a.get("queue"),
                    status=a.get("status"),
                    name=a.get("name"),
                    limit=a.get("limit", 1000),
                )
            )
        if op == "stats":
            return self._run(kernel.stats(a.get("queue")), write=False)
        if op == "queue_depth":
            return self._run(kernel.queue_depth(a["queue"], a["max_depth"]), write=False)
        if op == "claim":
            return self._claim(a)
        worker = str(a.get("worker_id"))
        if op == "heartbeat":
            lease_ms = a.get("lease_ms", 30000)
            return self._owned_write(kernel.heartbeat(self._lease(a["id"]), worker, lease_ms))
        if op == "heartbeat_batch":
            leases = [self._lease(i) for i in a["ids"]]
            held = self._run(kernel.heartbeat_batch(leases, worker, a.get("lease_ms", 30000)))
            return [{"id": i, "cancel_requested": held[i]} for i in a["ids"] if i in held]
        if op == "progress":
            return self._owned_write(
                kernel.progress(self._lease(a["id"]), worker, a.get("progress"), a.get("message"))
            )
        if op in ("succeed", "complete"):
            settle = kernel.succeed if op == "succeed" else kernel.complete
            result = DEFAULT_CODEC.encode_optional(a.get("result"), what="result")
            return self._owned_write(settle(self._lease(a["id"]), worker, result))
        if op == "fail":
            error = DEFAULT_CODEC.encode(a.get("error", {}), what="error")
            return self._owned_write(
                kernel.fail(
                    self._lease(a["id"]),
                    worker,
                    error,
                    retryable=bool(a.get("retryable", True)),
                    delay_ms=int(a.get("delay_ms", 0)),
                )
            )
        raise StepFailed(f"unknown op {op!r}")

    def _claim(self, a: dict[str, Any]) -> list[dict[str, Any]]:
        names = a.get("names")
        draw = kernel.Draw(names, int(a.get("limit", 1)))
        op = kernel.claim(a["queues"], a["worker_id"], int(a.get("lease_ms", 30000)), [draw], 1000)
        rows = self._run(op)
        for row in rows:
            self.leases[row["id"]] = Lease.of(row)
        return [Task.from_row(r).to_dict() for r in rows]


class _StoreInterpreter(_Interpreter):
    """The same scenarios, each step a call of the store layer's public method.

    Owned writes pass only the worker id, as the reference's store API does: the
    store finds the lease of its own claims, and reads it for tasks it did not claim.
    """

    def __init__(self, backend: Backend, clock: FakeClock | None, run: _Runner) -> None:
        super().__init__(backend, clock)
        self._await = run
        self.store = TaskStore(backend)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        result: T = self._await(coro)
        return result

    def perform(self, op: str, a: dict[str, Any]) -> Any:
        store = self.store
        if op == "sleep":
            return super().perform(op, a)
        if op == "submit":
            return self.call(
                store.submit(
                    name=a["name"],
                    payload=a.get("payload"),
                    queue=a.get("queue", "default"),
                    key=a.get("key"),
                    conflict=a.get("conflict", "reuse"),
                    max_attempts=a.get("max_attempts", 3),
                    priority=a.get("priority", 0),
                    metadata=a.get("metadata"),
                    parent_id=a.get("parent_id"),
                    root_id=a.get("root_id"),
                    correlation_id=a.get("correlation_id"),
                    delay_ms=a.get("run_at_delay_ms", a.get("delay_ms", 0)),
                )
            )
        if op in ("get", "get_status"):
            return self.call(getattr(store, op)(a["id"]))
        if op in ("get_by_key", "get_status_by_key", "cancel_by_key"):
            return self.call(getattr(store, op)(a["key"]))
        if op == "list":
            return self.call(store.list(**{k: a[k] for k in a if k != "op"}))
        if op == "cancel":
            return self.call(store.cancel(a["id"]))
        if op == "retry":
            return self.call(store.retry(a["id"], reset_attempt=bool(a.get("reset_attempt"))))
        if op == "retry_by_key":
            reset = bool(a.get("reset_attempt"))
            return self.call(store.retry_by_key(a["key"], reset_attempt=reset))
        if op == "purge":
            return self.call(
                store.purge(
                    older_than_ms=a.get("older_than_ms", 0),
                    queue=a.get("queue"),
                    status=a.get("status"),
                    name=a.get("name"),
                    limit=a.get("limit", 1000),
                )
            )
        if op == "stats":
            return self.call(store.stats(a.get("queue")))
        if op == "queue_depth":
            return self.call(store.queue_depth(a["queue"], a["max_depth"]))
        if op == "claim":
            return self.call(
                store.claim(
                    queues=a["queues"],
                    worker_id=a["worker_id"],
                    lease_ms=int(a.get("lease_ms", 30000)),
                    limit=int(a.get("limit", 1)),
                    names=a.get("names"),
                )
            )
        worker = str(a.get("worker_id"))
        lease_ms = int(a.get("lease_ms", 30000))
        if op == "heartbeat":
            return self.call(store.heartbeat(task_id=a["id"], worker_id=worker, lease_ms=lease_ms))
        if op == "heartbeat_batch":
            held = self.call(
                store.heartbeat_batch(task_ids=a["ids"], worker_id=worker, lease_ms=lease_ms)
            )
            return [{"id": i, "cancel_requested": held[i]} for i in a["ids"] if i in held]
        if op == "progress":
            return self.call(
                store.progress(
                    task_id=a["id"],
                    worker_id=worker,
                    progress=a.get("progress"),
                    message=a.get("message"),
                )
            )
        if op in ("succeed", "complete"):
            settle = store.succeed if op == "succeed" else store.complete
            return self.call(settle(task_id=a["id"], worker_id=worker, result=a.get("result")))
        if op == "fail":
            return self.call(
                store.fail(
                    task_id=a["id"],
                    worker_id=worker,
                    error=a.get("error", {}),
                    retryable=bool(a.get("retryable", True)),
                    delay_ms=int(a.get("delay_ms", 0)),
                )
            )
        raise StepFailed(f"unknown op {op!r}")


class _ClientInterpreter(_StoreInterpreter):
    """The same scenarios through the async client: its public methods for what a
    client does, and ``cq.store`` for the worker's side, as the reference's users do.
    """

    def __init__(self, backend: Backend, clock: FakeClock | None, run: _Runner) -> None:
        super().__init__(backend, clock, run)
        # The client runs on the scratch backend and leaves it open; its store
        # shares that backend, so claims made through it are the client's own.
        self.cq = CairnQ(backend)
        self.store = self.cq.store

    def perform(self, op: str, a: dict[str, Any]) -> Any:
        cq = self.cq
        if op == "submit":
            return self.call(
                cq.submit(
                    a["name"],
                    a.get("payload"),
                    queue=a.get("queue", "default"),
                    key=a.get("key"),
                    conflict=a.get("conflict", "reuse"),
                    max_attempts=a.get("max_attempts", 3),
                    priority=a.get("priority", 0),
                    metadata=a.get("metadata"),
                    parent_id=a.get("parent_id"),
                    root_id=a.get("root_id"),
                    correlation_id=a.get("correlation_id"),
                    delay_ms=a.get("run_at_delay_ms", a.get("delay_ms", 0)),
                )
            )
        if op in ("get", "get_status", "cancel"):
            return self.call(getattr(cq, op)(a["id"]))
        if op in ("get_by_key", "get_status_by_key", "cancel_by_key"):
            return self.call(getattr(cq, op)(a["key"]))
        if op == "list":
            return self.call(cq.list(**{k: a[k] for k in a if k != "op"}))
        if op == "retry":
            return self.call(cq.retry(a["id"], reset_attempt=bool(a.get("reset_attempt"))))
        if op == "retry_by_key":
            return self.call(cq.retry_by_key(a["key"], reset_attempt=bool(a.get("reset_attempt"))))
        if op == "purge":
            return self.call(
                cq.purge(
                    older_than_ms=a.get("older_than_ms", 0),
                    queue=a.get("queue"),
                    status=a.get("status"),
                    name=a.get("name"),
                    limit=a.get("limit", 1000),
                )
            )
        if op == "stats":
            return self.call(cq.stats(a.get("queue")))
        if op == "queue_depth":
            return self.call(cq.queue_depth(a["queue"], a["max_depth"]))
        return super().perform(op, a)
