"""The feature keywords ``Worker(...)`` and ``@worker.task(...)`` take by name, for typing,
and the old spellings of the worker's (its extensions' options, and its own ``*_ms``
options that became durations: ``renamed_durations``).

Each is an option of one extension (``Extension.options``,
``Extension.task_options``), which checks it when the worker is built (or the
handler registered) and builds its own state from it. A worker option is given to
the extension's constructor (``Worker(cq, extensions=[Snoozing(max_snoozes=5)])``);
as a keyword of ``Worker(...)`` it is kept for one release (``deprecated_options``
warns), typed here (``WorkerOptions``) so that a type checker still knows each
built-in's. The worker's old attributes for them are read here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, cast

from .._deprecated import renamed
from ..extensions import Extension

if TYPE_CHECKING:
    from ..extensions.limits._model import Limit

# The built-ins' worker options as their extensions' constructors spell them.
_SPELLED = {
    "schedules": "Schedules(evaluate=...)",
    "max_snoozes": "Snoozing(max_snoozes=...)",
    "limits": "Limits([...])",
    "record_attempts": "History(record=...)",
}


# The worker's ``*_ms`` options and the duration options beside them.
RENAMED_MS = {
    "heartbeat_interval_ms": "heartbeat_interval",
    "drain_timeout_ms": "drain_timeout",
    "recovery_interval_ms": "recovery_interval",
}
# Of those, the reference SDKs' own spellings (the Node SDK's ``heartbeatIntervalMs``,
# the reference Python repository's ``heartbeat_interval_ms``): taken without a warning.
REFERENCE_MS = frozenset({"heartbeat_interval_ms"})


class WorkerOptions(TypedDict, total=False):
    """The keywords of ``Worker(...)`` kept for one release: the built-in extensions'
    (``Worker(extensions=[...])`` takes the extension with its option instead), and
    the worker's old ``*_ms`` spellings of ``heartbeat_interval``, ``drain_timeout``
    and ``recovery_interval``."""

    schedules: bool
    max_snoozes: int
    limits: Sequence[Limit] | None
    record_attempts: bool
    heartbeat_interval_ms: int | None
    drain_timeout_ms: int
    recovery_interval_ms: int | None


def renamed_durations(options: Mapping[str, object]) -> dict[str, Any]:
    """Take the worker's ``*_ms`` options out of ``options`` (a dict), warning once each
    that the duration option replaces it (but for the reference SDKs' own,
    ``REFERENCE_MS``).

    Returns:
        The old options given, by old name (``{"drain_timeout_ms": 5000}``).
    """
    given = cast("dict[str, Any]", options)
    found: dict[str, Any] = {}
    for old, new in RENAMED_MS.items():
        if old in given:
            if old not in REFERENCE_MS:
                renamed(f"Worker({old}=...)", f"Worker({new}=...)")
            found[old] = given.pop(old)
    return found


class TaskOptions(TypedDict, total=False):
    """The built-in extensions' keywords of ``@worker.task(...)`` and ``register(...)``."""

    max_snoozes: int | None
    version: str | int | None


def deprecated_options(options: Mapping[str, object], extensions: Sequence[Extension]) -> None:
    """Warn, once per keyword, for each worker option in ``options`` given to ``Worker(...)``
    instead of to its extension (a keyword no extension takes is left to
    ``extensions.options``, which raises ``TypeError``)."""
    owners = {name: type(e) for e in extensions for name in e.options}
    for name in options:
        kind = owners.get(name)
        if kind is None:
            continue
        spelled = _SPELLED.get(name, f"{kind.__qualname__}({name}=...)")
        renamed(f"Worker({name}=...)", f"Worker(extensions=[{spelled}])")


class _Optioned(Protocol):
    @property
    def _options(self) -> Mapping[str, object]: ...


class WorkerAttributes:
    """The worker's attributes for its feature options, as before they were options."""

    @property
    def evaluates_schedules(self: _Optioned) -> bool:
        """Whether this worker evaluates the database's schedules (``schedules=``)."""
        return bool(self._options["schedules"])

    @property
    def limits(self: _Optioned) -> list[Limit]:
        """The limits this worker declares (``limits=``), checked."""
        return cast("list[Limit]", self._options["limits"])
