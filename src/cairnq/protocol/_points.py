"""The points where the kernel's operations let a feature in, named by what happens there.

The operations in ``kernel`` take these as arguments; they never import the feature
behind one. An operation given none keeps its plain form (one statement where it
has one), so a feature costs nothing where it is not used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .steps import Op, Row

TaskEnd = Callable[[Sequence[Row]], Op[object]]
"""Work inside the transaction that just ended tasks, given the rows it ended
(each with at least ``id`` and ``status``; a requeued task's row is among them)."""


class DrawClaimer(Protocol):
    """Claims the draws some rule of a feature governs, inside the claim's transaction.

    ``kernel.claim`` asks ``governing`` for each draw; a draw nothing governs is
    claimed as without a claimer.
    """

    def governing(self, queues: Sequence[str], names: Sequence[str] | None, /) -> Sequence[Any]:
        """The rules that govern a draw of ``names`` (``None``: any) in ``queues``; empty: none."""
        ...

    def claim(
        self,
        queues: Sequence[str],
        names: Sequence[str] | None,
        want: int,
        worker_id: str,
        lease_ms: int,
        governing: Sequence[Any],
        /,
    ) -> Op[list[Row]]:
        """Claim up to ``want`` due tasks of the draw that ``governing`` lets through.

        Returns the claimed rows (with ``lease_token``), in claim order.
        """
        ...
