"""Operations a store method stands for: where a replaced store method is called instead.

A ``StoreCall`` runs as the operation it wraps, so a backend runs it unchanged;
a driver that knows the store (the client's, the store's own) sees which store
method the operation stands for, and when that method is replaced on the store
(``cairnq.store.base.replaced``), calls it with ``args`` instead. The procedures
shared by both clients mark their steps this way (the backpressure gate's depth
probe, ``wait``'s final read), so they stay free of any store.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ..protocol.steps import Op, _Marked

T = TypeVar("T")


class StoreCall(_Marked[T]):
    """``op``, standing for ``store.<method>(*args, **kwargs)``.

    Example::

        step = StoreCall(kernel.get(task_id), "get", (task_id,))
    """

    __slots__ = ("args", "kwargs", "method")

    def __init__(
        self,
        op: Op[T],
        method: str,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(op)
        self.method = method
        self.args = args
        self.kwargs = {} if kwargs is None else kwargs

    @property
    def inner(self) -> Op[T]:
        """The operation itself, with whatever marks it carries for a backend."""
        return self._op
