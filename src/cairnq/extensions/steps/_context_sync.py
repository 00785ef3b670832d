# generated from src/cairnq/extensions/steps/_context_async.py by scripts/generate_sync.py; do not edit
# ruff: noqa: E501
"""What durable steps add to a plain ``def`` handler's context, blocking."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._context import SyncHost
from ._context_async import StepsContext


class SyncStepsContext:
    """``ctx.step``, ``ctx.transaction_step`` and ``ctx.steps``, mixed into ``SyncTaskContext``."""

    def step(
        self: SyncHost,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        retries: int = 0,
        backoff: Any = 1.0,
        transactional: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` once per task: its result is recorded, and a later
        attempt (a retry, a run after a crash) gets the recorded result back instead.

        The result is written fenced on this attempt's lease, so a stale attempt's
        write is refused. It must be JSON the client's codec can encode (the same
        rules as a task's result); it is returned as read back from JSON, so the
        first run and a replay see the same value (a tuple comes back a list).
        Each step name may be used once per run; a name used twice raises.

        ``fn`` may be a plain or a coroutine function; it runs in the handler's thread
        (a plain ``def`` handler's own), a transactional step's where the transaction
        is. An exception from ``fn`` is
        retried ``retries`` times, waiting ``backoff`` (doubling each time); after
        that it propagates, and the attempt fails like any handler error (nothing
        is recorded, so the next attempt runs the step again). A permanent error
        (``errors.is_permanent``: an ``InvalidArgument`` such as a result that is
        not JSON, a name used twice or a bad option) is not retried: it fails the
        task at once, whatever attempts are left.

        With ``transactional=True``, ``fn(conn, *args, **kwargs)`` runs inside the
        transaction that records the step, so its writes commit exactly when the
        step is recorded: on PostgreSQL ``conn`` is the ``psycopg.AsyncConnection``
        (``fn`` may be async); on SQLite it is the ``sqlite3.Connection`` of the
        write transaction (``fn`` must be a plain function; use it for tables in
        the same database file). ``fn`` must not commit or roll back.

        Args:
            name: The step's name, unique within the task (``"fetch-invoice"``).
            fn: What the step does.
            *args: Positional arguments for ``fn``.
            retries: How many times to retry ``fn`` after an exception (0 by default).
            backoff: The wait before the first retry: seconds, a ``timedelta`` or
                ``"2s"`` (1 second by default), doubling for each further retry.
            transactional: Run ``fn`` inside the recording transaction.
            **kwargs: Keyword arguments for ``fn`` (other than the names above).

        Returns:
            The step's result: recorded now, or by an earlier attempt.

        Raises:
            InvalidArgument: a bad name or option, or a name this run used already
                (nothing is written).
            SerializationError: the result is not JSON the codec accepts (nothing is written).
            LostLease: this attempt no longer owns the task; nothing is recorded.
            SchemaIncomplete: the database lacks the steps table (``cairnq migrate``).
            UnsupportedBackend: ``transactional=True`` on a backend without it.

        Example::

            @worker.task
            def bill(ctx, payload):
                invoice = ctx.step("fetch-invoice", fetch_invoice, payload["id"])
                charge = ctx.step("charge", charge_card, invoice, retries=3)
                ctx.step("email", send_receipt, charge)
        """
        return self._call(
            StepsContext.step(
                self._inner,
                name,
                fn,
                *args,
                retries=retries,
                backoff=backoff,
                transactional=transactional,
                **kwargs,
            )
        )

    transaction_step = functools.partialmethod(step, transactional=True)

    def steps(self: SyncHost) -> dict[str, Any]:
        """The results every attempt of this task recorded so far, by step name."""
        return self._call(StepsContext.steps(self._inner))

    def patched(self: SyncHost, name: str) -> bool:
        """Whether this run takes the new branch of a change made to the handler's steps
        while tasks were in flight (as DBOS's ``patch``).

        ``True`` for a task that had not run past this point before the change (a new
        task, or a retry of one that never got here): that is recorded, so every later
        attempt of the task gets ``True`` too. ``False`` for a task whose earlier
        attempts recorded steps past this point on the old code: it keeps to the old
        branch, whose steps were recorded. Remove the call with the old branch once
        no such task is left; a task that recorded ``True`` goes on without it.

        Args:
            name: The change's name, unique within the handler (``"new-charge"``).

        Returns:
            Whether to run the new code.

        Raises:
            InvalidArgument: a bad name.
            StepsChanged: the recorded steps no longer match the handler (``step``).
            LostLease: this attempt no longer owns the task; nothing is recorded.

        Example::

            if ctx.patched("charge-in-cents"):
                charge = ctx.step("charge-cents", charge_cents, invoice)
            else:
                charge = ctx.step("charge", charge_card, invoice)
        """
        return self._call(StepsContext.patched(self._inner, name))
