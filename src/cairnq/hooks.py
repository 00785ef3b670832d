"""Submit hooks: how instrumentation sees (and annotates) the tasks a client writes.

A submit hook is ``hook(pending) -> done | None``, called once per task, before
the write, for ``submit``, ``submit_many`` and a handler's ``ctx.submit``. It
may add keys to the task's metadata (``pending.add_metadata``). ``done``, when
returned, is called once after the write with ``(task, None)`` (the stored
task; for a reused key, the existing one) or ``(None, error)``. With
``submit(..., conn=...)`` "after the write" means after the statement, inside
the application's transaction: a rollback after it still leaves the hook's
``done`` called with the task.

A client with no hooks pays one attribute check per submit. A hook that raises
is logged and skipped: instrumentation never fails a submit.

Example::

    def count(pending):
        def done(task, error):
            if task is not None and task.id == pending.id:   # inserted, not reused
                print("submitted", pending.name, "to", pending.queue)
        return done

    remove = cq.add_submit_hook(count)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import InvalidArgument
from .models import Task

if TYPE_CHECKING:
    from ._json import JsonCodec
    from .kernel import NewTask

__all__ = ["PendingSubmit", "SubmitDone", "SubmitHook"]

log = logging.getLogger("cairnq.client")

SubmitDone = Callable[[Task | None, BaseException | None], None]
"""Called after the write: ``(stored task, None)`` or ``(None, the error raised)``."""


class PendingSubmit:
    """A validated task a client is about to write, as a submit hook sees it.

    ``id`` is the id the task gets if it is inserted; a keyed submit that reuses
    an existing task returns that task instead (compare ids in ``done``).
    """

    __slots__ = ("_added", "_spec")

    def __init__(self, spec: NewTask) -> None:
        self._spec = spec
        self._added: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"<PendingSubmit {self.id} {self.name!r} queue={self.queue!r}>"

    @property
    def id(self) -> str:
        return self._spec.id

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def queue(self) -> str:
        return self._spec.queue

    @property
    def key(self) -> str | None:
        return self._spec.key

    @property
    def metadata(self) -> Any:
        """The metadata as it will be stored (``{}`` when none was given)."""
        value = self._spec.metadata_value
        if self._added and isinstance(value, dict):
            return {**value, **self._added}
        return value

    def add_metadata(self, key: str, value: Any) -> bool:
        """Add ``key`` to the task's metadata, never replacing what is there.

        Only metadata that is a JSON object (the default ``{}`` included) gets
        keys; a list, string, number or ``null`` given by the caller is left
        exactly as it is.

        Args:
            key: The metadata key.
            value: A JSON value.

        Returns:
            Whether the key was added (False: the metadata is not an object, or
            already has ``key``).

        Raises:
            InvalidArgument: ``key`` is not a string.
        """
        if not isinstance(key, str):
            raise InvalidArgument(f"metadata keys must be strings, not {type(key).__name__}")
        current = self._spec.metadata_value
        if not isinstance(current, dict) or key in current:
            return False
        if self._added is None:
            self._added = {}
        elif key in self._added:
            return False
        self._added[key] = value
        return True

    def _resolved(self, codec: JsonCodec) -> NewTask:
        """The spec to write: re-encoded with the added keys, or unchanged.

        Added keys that would make the metadata unstorable (over the size limit)
        are dropped rather than failing the submit.
        """
        if not self._added:
            return self._spec
        value = {**self._spec.metadata_value, **self._added}
        try:
            text = codec.encode(value, what="metadata")
        except InvalidArgument:
            log.warning(
                "metadata added by a submit hook was dropped: it cannot be stored",
                extra={"task_id": self.id, "task_name": self.name},
            )
            return self._spec
        return dataclasses.replace(self._spec, metadata=text, metadata_value=value)


SubmitHook = Callable[[PendingSubmit], SubmitDone | None]
"""``hook(pending) -> done | None``; see the module docstring."""


def before_submit(
    hooks: Sequence[SubmitHook], specs: Sequence[NewTask], codec: JsonCodec
) -> tuple[list[NewTask], list[tuple[int, SubmitDone]]]:
    """Run every hook on every spec; returns the specs to write and the ``done`` callbacks."""
    resolved: list[NewTask] = []
    finishers: list[tuple[int, SubmitDone]] = []
    for index, spec in enumerate(specs):
        pending = PendingSubmit(spec)
        for hook in hooks:
            try:
                done = hook(pending)
            except Exception:
                log.exception("submit hook failed", extra={"task_name": spec.name})
                continue
            if done is not None:
                finishers.append((index, done))
        resolved.append(pending._resolved(codec))
    return resolved, finishers


def after_submit(
    finishers: Sequence[tuple[int, SubmitDone]],
    tasks: Sequence[Task] | None,
    error: BaseException | None,
) -> None:
    """Call each ``done`` with its task (or the error); a callback that raises is logged."""
    for index, done in finishers:
        try:
            done(None if tasks is None else tasks[index], error)
        except Exception:
            log.exception("submit hook failed after the write")
