"""Uniqueness over time, debounce and throttle: submit options decided in the submit's
own transaction, under the key's lock.

- ``submit(key=..., unique_for="1h")``: at most one task per key per period, whatever
  becomes of it; the period's record (``cairnq_uniqueness_periods``) outlives the task,
  so a purge does not reopen the key before the period ends.
- ``submit(key=..., debounce="30s")``: the last submit within the quiet period wins:
  the key's task, while queued and never started, takes the newest payload and is due
  ``debounce`` after the newest submit.
- ``submit(throttle=Throttle(10, "1m", key=...))``: at most ten tasks enqueued per
  minute under the throttle key (``cairnq_uniqueness_throttle``); one more raises
  ``Throttled``.

``cq.uniqueness`` reads a key's running period and a throttle key's count.
Nothing of it runs in a worker: the extension has no hooks or parts, and a submit
without these options never reads its tables. Migration ``x0018_uniqueness.sql``;
statements ``sql/<dialect>/uniqueness_*.sql``; ``docs/uniqueness.md`` describes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from ..._lazy import exports
from .._base import Extension, TaskRows

if TYPE_CHECKING:
    from ._model import NotUnique, Period, Policy, Throttle, Throttled, policy_of
    from ._ops import submit
else:
    # The model and the operations are imported when first used.
    __getattr__, __dir__ = exports(
        __name__,
        {
            "NotUnique": "._model",
            "Period": "._model",
            "Policy": "._model",
            "Throttle": "._model",
            "Throttled": "._model",
            "policy_of": "._model",
            "submit": "._ops",
        },
    )

__all__ = [
    "NotUnique",
    "Period",
    "Policy",
    "Throttle",
    "Throttled",
    "Uniqueness",
    "policy_of",
    "submit",
]


class Uniqueness(Extension):
    """The declaration: its tables and migration. It takes no worker options and plugs
    nothing into a worker: the client's submit runs it (``submit(unique_for=...,
    debounce=..., throttle=...)``)."""

    name = "uniqueness"
    migrations = ("x0018_uniqueness.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_uniqueness_periods": "swept",
        "cairnq_uniqueness_throttle": "swept",
    }
    words = ("uniqueness", "unique_for", "debounce")
    # No worker part of it steps aside: a submit that uses it on a database without its
    # tables is refused with SchemaIncomplete, which names them.
    says_when_missing = True
