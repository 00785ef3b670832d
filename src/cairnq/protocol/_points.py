"""``TaskEnd``, the one extension point the backends see (``Backend.complete_in``).

The kernel's points, and the ``Points`` that carries them, are in ``kernel.points``;
this one stays below the backends, which take a single hook.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .steps import Op, Row

TaskEnd = Callable[[Sequence[Row]], Op[object]]
"""Work inside the transaction that just ended tasks, given the rows it ended
(each with at least ``id`` and ``status``; a requeued task's row is among them)."""
