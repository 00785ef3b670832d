"""The built-in extensions' client parts, composed: what ``CairnQ`` adds to the kernel's
operations. Part of the registry of built-ins (``_registry.builtins``).

Each built-in's mixin (``<name>/_client_async.py``) gives the client its namespace
(``cq.limits``, ``cq.pauses``, ``cq.presence``, ``cq.workflows``, ``cq.schedules``,
``cq.snooze``, ``cq.steps``, ``cq.attempts``, ``cq.batches``, ``cq.uniqueness``,
``cq.events``) and the flat methods that came before it, kept for one release (each
warns once); ``AsyncBuiltins`` joins them, and extends ``submit`` with the keywords that
belong to a built-in: ``depends_on`` and ``on_dependency_failure`` (workflows),
``warn_unserved`` (presence), ``unique_for``, ``debounce`` and ``throttle`` (uniqueness).

``scripts/generate_sync.py`` turns this file into ``_builtins_client_sync.py``
beside it (``SyncBuiltins``, which ``SyncCairnQ`` inherits).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from .._clock import Clock
from ..backoff import Retry, attempts_of
from ..durations import Duration
from ..errors import InvalidArgument
from ..kernel.points import Points
from ..lineage import Lineage
from ..models import Task, TaskDef
from ._client_async import ClientView
from ._submit_path import also, spec_for_submit
from .batches._client_async import AsyncBatchesClient
from .history._client_async import AsyncHistoryClient
from .limits._client_async import AsyncLimitsClient
from .pauses._client_async import AsyncPausesClient
from .policies._client_async import AsyncPoliciesClient
from .presence._client_async import AsyncPresenceClient
from .schedules._client_async import AsyncSchedulesClient
from .search._client_async import AsyncSearchClient, submit_terms
from .snooze._client_async import AsyncSnoozeClient
from .steps._client_async import AsyncStepsClient
from .uniqueness._client_async import AsyncUniquenessClient, policy_options
from .waits._client_async import AsyncEventsClient
from .workflows._client_async import AsyncWorkflowsClient

if TYPE_CHECKING:
    from .policies._ops import SubmitPolicy
    from .uniqueness import Throttle
    from .workflows._awaited import Awaited


class _Client(ClientView, Protocol):
    """The client with the state the built-ins' client parts keep on it."""

    _awaited: Awaited | None
    _told_no_presence: bool

    def _clock(self) -> Clock: ...

    async def _ends(self) -> Points: ...


class AsyncBuiltins(
    AsyncLimitsClient,
    AsyncPausesClient,
    AsyncPresenceClient,
    AsyncWorkflowsClient,
    AsyncSchedulesClient,
    AsyncSnoozeClient,
    AsyncStepsClient,
    AsyncHistoryClient,
    AsyncBatchesClient,
    AsyncUniquenessClient,
    AsyncEventsClient,
    AsyncPoliciesClient,
    AsyncSearchClient,
):
    """The built-in extensions' namespaces and flat methods, and ``submit`` with their keywords."""

    async def submit(
        self: _Client,
        task: str | TaskDef[Any, Any] | Callable[..., Any] | None = None,
        payload: Any = None,
        *,
        name: str | TaskDef[Any, Any] | None = None,
        key: str | None = None,
        queue: str | None = None,
        conflict: str = "reuse",
        max_attempts: int | None = None,
        priority: int | None = None,
        metadata: Any = None,
        delay_ms: int | None = None,
        delay: Duration | None = None,
        run_at: datetime.datetime | None = None,
        parent_id: str | None = None,
        root_id: str | None = None,
        correlation_id: str | None = None,
        lineage: Lineage | None = None,
        conn: Any = None,
        warn_unserved: bool = False,
        depends_on: Iterable[Any] | None = None,
        on_dependency_failure: str = "cancel",
        unique_for: Duration | None = None,
        debounce: Duration | None = None,
        throttle: Throttle | tuple[Any, ...] | None = None,
        retry: Retry | None = None,
        timeout: Duration | None = None,
        expires_in: Duration | None = None,
        deadline: datetime.datetime | None = None,
        tags: Iterable[str] | None = None,
    ) -> Task:
        """Enqueue a task.

        Args:
            task: The handler name, or a ``TaskDef`` (its queue, max_attempts and
                priority become the defaults), or a handler function a worker in this
                process registered (``@worker.task``): its task name.
            payload: Any JSON value (``None`` stores ``{}``).
            name: Another spelling of ``task`` (the reference SDK's); give one of the two.
            key: Idempotency key; ``conflict`` says what happens when it is taken.
            queue: Queue name (``"default"``).
            conflict: ``"reuse"`` (return the live task), ``"reuse-succeeded"``
                (also return a succeeded one), ``"reject"`` (raise ``AlreadyExists``)
                or ``"replace"`` (cancel the live task, enqueue anew).
            max_attempts: Runs allowed, counting crashed ones (3).
            priority: Higher runs first (0).
            metadata: Any JSON value, opaque to cairnq (``{}``).
            delay_ms: Earliest start, from now, in milliseconds (the reference SDK's).
            delay: Earliest start, from now: seconds as a number, a ``timedelta``
                or a string with a unit (``"5m"``, ``"1.5s"``).
            run_at: Earliest start as an aware ``datetime`` (a naive one is
                refused), read against this client's clock; one in the past
                means now. Give at most one of ``delay``, ``run_at``, ``delay_ms``.
            parent_id, root_id, correlation_id: Lineage (root defaults to the task
                itself); or give them as ``lineage=``.
            lineage: A ``cairnq.Lineage``: the three above as one value. Give it or
                them, not both.
            conn: PostgreSQL only: the application's psycopg connection. The task is
                written in that connection's transaction: visible when it commits,
                gone if it rolls back.
            warn_unserved: After storing a queued task, check that a live cairnq
                worker serves its name on its queue; if none does, log a warning
                (logger ``cairnq.client``) and emit an ``UnservedTaskWarning``. The
                task stays submitted either way. Off by default: an application
                often submits before its workers start, and workers of other SDKs
                publish no presence, so a queue they alone serve would warn. The
                ``cairnq submit`` command turns it on (``--no-warn-unserved``).
            depends_on: Tasks (``Task`` objects or ids) this one runs after: it is
                stored parked (queued, due 9999-12-31, so no worker claims it) and
                released, due ``delay_ms`` later, in the transaction where the last
                of them succeeds. Needs the workflow tables (``cairnq migrate``).
            on_dependency_failure: When a dependency ends failed or canceled:
                ``"cancel"`` this task (and, in turn, what depends on it),
                ``"fail"`` it with a ``dependency_failed`` error, or ``"run"`` it
                once every dependency ended (``ctx.dependencies()`` shows how).
            unique_for: With ``key``: at most one task per key per period (a
                duration), whatever becomes of it, even once purged. Within the
                period the period's task is returned (``NotUnique`` under
                ``conflict="reject"`` or once it was purged). See ``docs/uniqueness.md``.
            debounce: With ``key``: the last submit within this quiet period wins:
                the key's task, while queued and never started, takes this payload
                and is due ``debounce`` from now; else a new task is due then.
            throttle: A ``cairnq.uniqueness.Throttle(limit, per, key=None)`` (or a
                ``(limit, per)`` tuple): at most ``limit`` tasks enqueued per ``per``
                under the throttle key (the submit's ``key`` by default); one more
                raises ``Throttled``. ``unique_for``, ``debounce`` and ``throttle``
                may be given on a ``TaskDef`` too (``options={...}``).
            retry: A ``cairnq.Retry`` for this task alone, in place of its handler's
                (a named backoff: a function cannot be stored); its ``max_attempts``
                is written into the task's row.
            timeout: How long one run of this task may take, a duration (its
                handler's ``timeout`` or the worker's ``max_run_ms`` otherwise).
            expires_in: How long the task may wait to start, a duration: a cairnq
                worker never starts it later, and it ends ``canceled`` with the
                reason ``expired`` (``cq.policies.of``).
            deadline: The same as an aware ``datetime``; give at most one of the two.
                ``retry``, ``timeout``, ``expires_in`` and ``deadline`` need the
                policies' table (``cairnq migrate``); see ``docs/policies.md``.
            tags: Tags (strings of 1 to 64 characters without whitespace, commas or
                quotes; at most 32) that ``cq.search.find(tags=...)``, ``cairnq ls
                --tag`` and the dashboard's search find the task by; stored with it,
                in its transaction, beside the declared search fields the client's
                ``Search(fields=...)`` finds in it (``docs/search.md``). A reused
                key's task keeps its own. A ``TaskDef``'s ``options={"tags": [...]}``
                are the tags of its submits that give none.

        Returns:
            The stored task (for a reused key, the existing one).

        Raises:
            InvalidArgument: a bad name, queue, key, number or duration, a naive
                ``run_at``, more than one of ``delay``/``run_at``/``delay_ms``,
                ``lineage`` with the lineage keywords, or both ``task`` and
                ``name``; nothing is written.
            SerializationError: payload or metadata is not portable JSON.
            AlreadyExists: the key is taken and ``conflict="reject"``.
            UnsupportedBackend: ``conn`` given on a backend without shared connections.
            InvalidGraph: a dependency does not exist (or was purged); nothing is written.
            SchemaIncomplete: ``depends_on`` on a database without the workflow tables,
                a policy on one without the policies' table, or tags (or a declared
                field found) on one without the search table.
            NotUnique: ``unique_for``'s period holds a purged task, or ``conflict="reject"``.
            Throttled: ``throttle``'s key is full; nothing is written.

        Example::

            task = await cq.submit("email.send", {"to": "ada@example.com"}, warn_unserved=True)
            report = await cq.submit("report.build", depends_on=[task])
            later = await cq.submit("digest.send", delay="1h30m")
        """
        terms = submit_terms(self, tags, task, name)
        policy = None
        if not (retry is None and timeout is None and expires_in is None and deadline is None):
            policy = policies_of(self, retry, timeout, expires_in, deadline, max_attempts)
            if depends_on is not None:
                raise InvalidArgument(
                    "retry, timeout, expires_in and deadline are not taken with depends_on"
                )
        spec = spec_for_submit(
            self,
            task, payload, name, key, queue, conflict, max_attempts, priority, metadata,
            delay_ms, delay, run_at, parent_id, root_id, correlation_id, lineage,
        )  # fmt: skip
        unique_for, debounce, throttle = policy_options(task, name, unique_for, debounce, throttle)
        unique = None
        if not (unique_for is None and debounce is None and throttle is None):
            from .uniqueness import policy_of

            unique = policy_of(
                spec,
                unique_for,
                debounce,
                throttle,
                given_start=delay is not None or run_at is not None or delay_ms is not None,
            )
        with also(terms):
            stored = await _submit_on_path(
                self, spec, unique, policy, depends_on, on_dependency_failure, conn
            )
        if warn_unserved and stored.is_queued:
            await AsyncPresenceClient._check_served(self, stored)
        return stored


async def _submit_on_path(
    self: _Client,
    spec: Any,
    unique: Any,
    policy: SubmitPolicy | None,
    depends_on: Iterable[Any] | None,
    on_dependency_failure: str,
    conn: Any,
) -> Task:
    """Store ``spec`` on the path its options take: uniqueness, task policies,
    dependencies, or the plain one.

    Raises:
        InvalidArgument: options that do not go together; nothing is written.
    """
    if unique is not None:
        if depends_on is not None:
            raise InvalidArgument("depends_on takes no unique_for, debounce or throttle")
        if policy is not None:
            raise InvalidArgument(
                "unique_for, debounce and throttle are not taken with retry, timeout, "
                "expires_in or deadline"
            )
        stored = await AsyncUniquenessClient._submit_policed(self, spec, unique, conn)
    elif policy is not None:
        stored = await AsyncPoliciesClient._submit_with_policies(self, spec, policy, conn)
    elif depends_on is not None:
        stored = await AsyncWorkflowsClient._submit_after(
            self, spec, depends_on, on_dependency_failure, conn
        )
    else:
        stored = await self._submit_one(spec, conn)
    return stored


def policies_of(
    client: _Client,
    retry: Any,
    timeout: Any,
    expires_in: Any,
    deadline: Any,
    max_attempts: Any,
) -> SubmitPolicy | None:
    """``submit``'s policies, checked before anything is written.

    Raises:
        InvalidArgument: a bad policy, or ``max_attempts`` and a retry policy's differing.
    """
    from .policies._ops import check_submit

    policy = check_submit(
        retry=retry,
        timeout=timeout,
        expires_in=expires_in,
        deadline=deadline,
        now_ms=client._clock().now_ms(),
    )
    if policy is not None and policy.max_attempts is not None and max_attempts is not None:
        attempts_of(max_attempts, retry, "submit()")
    return policy
