"""What several kernel modules share: a claim's ``Draw``, wake-ups for the rows a statement moved,
the checks of looked-up ids and keys, and the name an operation goes by.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .._checks import check_text
from ..models import TERMINAL_STATUSES
from ..protocol.steps import Emit, Op, Row

_R = TypeVar("_R")


@dataclass(frozen=True)
class Draw:
    """One claim draw inside a claim transaction: up to ``limit`` tasks of ``names``.

    ``names=None`` means any name; an empty list claims nothing.
    """

    names: Sequence[str] | None
    limit: int


def _emit_for(rows: Iterable[Row]) -> Op[None]:
    """Wake-ups for rows a statement just moved: to ``queued``, or to a terminal status."""
    for row in rows:
        status = row["status"]
        if status == "queued":
            yield Emit("queued", row["queue"])
        elif status in TERMINAL_STATUSES:
            yield Emit("done", row["id"])


def _id(task_id: Any) -> str:
    """A task id as looked up: text that could have been stored (ids are checked like names)."""
    return check_text(task_id, "task id") or ""


def _key(key: Any) -> str:
    return check_text(key, "key") or ""


def _named(op: Op[_R], name: str) -> Op[_R]:
    """``op`` under the operation's public name, which crash points and logs go by."""
    op.__name__ = name  # type: ignore[attr-defined]
    return op
