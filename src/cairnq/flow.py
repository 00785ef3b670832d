"""Flow control a handler or an operator asks for: snoozing a task, pausing a queue or a name.

``Snooze`` is raised from a handler; ``Snoozes`` and ``Pause`` are what the
client's ``snoozes`` and ``paused`` read back.
"""

from __future__ import annotations

from typing import Any

from .protocol.flow import DEFAULT_MAX_SNOOZES, Pause, Snoozes, snooze_delay_ms

__all__ = ["DEFAULT_MAX_SNOOZES", "Pause", "Snooze", "Snoozes"]


class Snooze(Exception):
    """Raise from a handler to queue its task again after a delay without spending an attempt.

    The same as ``await ctx.snooze(delay)`` and returning: bounded by the task's
    ``max_snoozes``, past which the task fails with a ``snooze_limit`` error.
    Raised from a batch handler, it snoozes every task of the call still unsettled.

    Args:
        delay: Seconds (a number), a ``timedelta``, or a duration such as ``"30s"``;
            give it or ``delay_ms``.
        delay_ms: The delay in milliseconds.

    Raises:
        InvalidArgument: no delay, both, or a bad one (when raised, not when handled).

    Example::

        @worker.task
        async def call_api(ctx, payload):
            response = await http.post(URL, json=payload)
            if response.status_code == 429:
                raise Snooze(float(response.headers.get("Retry-After", 30)))
            return response.json()
    """

    def __init__(self, delay: Any = None, *, delay_ms: int | None = None) -> None:
        self.delay_ms = snooze_delay_ms(delay, delay_ms)
        super().__init__(f"snooze for {self.delay_ms} ms")
