"""The built-in extensions, in order, and what a worker's run compiles from a list of
them: their components, and their kernel hooks as one ``Points``; and the ``Points``
of the writes that end tasks or attempts outside a worker run (``Endings``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from .. import kernel
from .._readiness import Readiness
from ..backends import Backend
from ..errors import InvalidArgument, InvalidExtension
from ..kernel.periodic import ErrorHook, PeriodicJob
from ..kernel.points import InUse, Points, Settling
from ..protocol.steps import Op
from ._base import Component, Extension, Option, Part, WorkerView, listed
from ._context import Signal
from .batches import Batches
from .history import History
from .limits import Limits
from .logs import AttemptLogs
from .pauses import Pauses
from .policies import Policies
from .presence import Presence
from .schedules import Schedules
from .search import Search
from .snooze import Snoozing
from .steps import Steps
from .uniqueness import Uniqueness
from .waits import Waits
from .workflows import Workflows

log = logging.getLogger("cairnq.worker")

# How often a worker reads the migration ledger again for its extensions' readiness.
LEDGER_LOOK_MS = 30_000


def builtins() -> list[Extension]:
    """cairnq's own features, in the order their worker parts are prepared.

    Limits come first: a worker declaring limits on a database without them is
    refused before any other part has written anything (presence its row).
    """
    return [
        Limits(),
        Pauses(),
        Presence(),
        Workflows(),
        Schedules(),
        Snoozing(),
        Steps(),
        History(),
        Batches(),
        Uniqueness(),
        Waits(),
        Policies(),
        AttemptLogs(),
        Search(),
    ]


def check(extensions: Sequence[Extension]) -> list[Extension]:
    """``extensions`` as a list, once each name, each migration, table and option owned once.

    Raises:
        InvalidExtension: two extensions share a name, or own the same migration,
            table, worker option or task option.
        InvalidArgument: one is no ``Extension``.
    """
    names: set[str] = set()
    owners: dict[tuple[str, str], str] = {}
    for extension in extensions:
        if not isinstance(extension, Extension):
            raise InvalidArgument(f"not an Extension: {extension!r}")
        if extension.name in names:
            raise InvalidExtension(
                f"two extensions are named {extension.name}", extension=extension.name
            )
        names.add(extension.name)
        owned = [
            *(("migration", m) for m in extension.migrations),
            *(("table", t) for t in extension.tables),
            *(("worker option", o) for o in extension.options),
            *(("task option", o) for o in extension.task_options),
        ]
        for kind, what in owned:
            owner = owners.setdefault((kind, what), extension.name)
            if owner != extension.name:
                raise InvalidExtension(
                    f"{kind} {what} is {owner}'s; it declares it too", extension=extension.name
                )
    return list(extensions)


def for_worker(client: Sequence[Extension], given: Sequence[Extension]) -> list[Extension]:
    """What a worker runs: cairnq's own extensions, then its ``client``'s, then the
    others it is ``given``, checked (``check``).

    An extension given to both the client and the worker (one of the same class and
    name) counts once, in the client's place, and the worker's instance is the one
    that runs. One of cairnq's own given to either (``Limits([...])``, with its
    options) takes the place of the default instance, in cairnq's order.

    Raises:
        InvalidExtension: two different extensions share a name, or own the same
            migration or table.
        InvalidArgument: ``given`` is no list of extensions, or one is no ``Extension``.
    """
    extra = listed(given)
    joined: list[Extension] = []
    for extension in client:
        same = [i for i, e in enumerate(extra) if _same(e, extension)]
        joined.append(extra.pop(same[0]) if same else extension)
    own = builtins()
    for i, default in enumerate(own):
        same = [j for j, e in enumerate(joined) if _same(e, default)]
        if same:
            own[i] = joined.pop(same[0])
        else:
            same = [j for j, e in enumerate(extra) if _same(e, default)]
            if same:
                own[i] = extra.pop(same[0])
    return check([*own, *joined, *extra])


def waiting_extensions(extensions: Sequence[Extension]) -> list[Extension]:
    """Those of cairnq's own extensions and ``extensions`` that park tasks
    (``Extension.parked``), checked as ``for_worker`` checks them."""
    return [e for e in for_worker(extensions, ()) if e.parked(None) is not None]


def waiting_counts(extensions: Sequence[Extension], queue: str | None) -> Op[dict[str, int]]:
    """Per queue (``queue`` alone when given), the tasks ``extensions`` (those of
    ``waiting_extensions``) hold parked now, summed; an extension not ready on the database
    (its migrations missing) holds none. One read of the migration ledger, then one
    count per ready extension."""
    applied = yield from kernel.applied_migrations()
    total: dict[str, int] = {}
    for extension in extensions:
        counting = None if extension.missing(applied) else extension.parked(queue)
        if counting is None:
            continue
        counted = yield from counting
        for name, n in counted.items():
            total[name] = total.get(name, 0) + n
    return total


def _same(one: object, other: object) -> bool:
    """Whether ``one`` and ``other`` are the same extension: one class, one name."""
    name = getattr(one, "name", None)
    return type(one) is type(other) and name is not None and name == getattr(other, "name", None)


def options(
    extensions: Sequence[Extension], given: Mapping[str, object], where: str = "Worker()"
) -> dict[str, object]:
    """Every worker option of ``extensions`` (``Extension.options``), checked: its value in
    ``given`` (the worker's keywords, kept for one release), else the one its extension
    was built with (``Extension.settings``), else its default.

    Raises:
        TypeError: ``given`` holds a keyword none of them takes (as ``where`` would
            for an unexpected keyword).
        InvalidArgument: a value its option's check refuses.
    """
    declared = [(e.name, e.options) for e in extensions]
    unknown(declared, given, where)
    values = {name: value for e in extensions for name, value in e.settings.items()}
    values.update(given)
    return {
        name: option.check(values.get(name, option.default))
        for _, owned in declared
        for name, option in owned.items()
    }


def task_options(
    extensions: Sequence[Extension], given: Mapping[str, object], where: str = "task()"
) -> dict[str, object]:
    """The task options of ``extensions`` (``Extension.task_options``) given for one
    handler, checked; those not given are left out (the handler takes the worker's).

    Raises:
        TypeError: ``given`` holds a keyword none of them takes.
        InvalidArgument: a value its option's check refuses.
    """
    declared = [(e.name, e.task_options) for e in extensions]
    unknown(declared, given, where)
    table = {name: option for _, owned in declared for name, option in owned.items()}
    return {name: table[name].check(value) for name, value in given.items()}


def unknown(
    declared: Sequence[tuple[str, Mapping[str, Option]]], given: Mapping[str, object], where: str
) -> None:
    """Raise ``TypeError`` for the first keyword of ``given`` no extension declares."""
    taken = {name for _, owned in declared for name in owned}
    for name in given:
        if name not in taken:
            raise TypeError(f"{where} got an unexpected keyword argument {name!r}")


def components(extensions: Sequence[Extension], worker: WorkerView) -> list[Component]:
    """The worker parts of ``extensions`` for one run of ``worker``, in their order."""
    return [part for extension in extensions for part in extension.components(worker)]


def signals(extensions: Sequence[Extension]) -> dict[type[BaseException], Signal]:
    """The handler signals ``extensions`` settle, by exception class.

    Raises:
        InvalidExtension: two extensions settle the same class.
    """
    table: dict[type[BaseException], Signal] = {}
    owners: dict[type[BaseException], str] = {}
    for extension in extensions:
        for kind, signal in extension.signals().items():
            if kind in table:
                raise InvalidExtension(
                    f"handler signal {kind.__name__} is {owners[kind]}'s; it declares it too",
                    extension=extension.name,
                )
            table[kind], owners[kind] = signal, extension.name
    return table


class Ready:
    """Which of a worker's extensions are ready, as last read from the migration ledger
    (``Extension.missing``); each counts as ready until the first read."""

    def __init__(self, extensions: Sequence[Extension]) -> None:
        self.missing: dict[str, tuple[str, ...]] = {e.name: () for e in extensions}
        self.extensions = list(extensions)

    def note(self, applied: Collection[str]) -> list[Extension]:
        """Read readiness from ``applied``; returns the extensions not ready now that were."""
        stepped_aside = []
        for extension in self.extensions:
            missing = extension.missing(applied)
            if missing and not self.missing[extension.name]:
                stepped_aside.append(extension)
            self.missing[extension.name] = missing
        return stepped_aside

    def gate(self, extension: Extension, in_use: InUse) -> InUse:
        """``in_use``, and only while ``extension`` is ready."""
        missing = self.missing
        name = extension.name
        return lambda: not missing[name] and in_use()


def step_aside_line(extensions: Sequence[Extension], missing: dict[str, tuple[str, ...]]) -> str:
    """The one line a worker logs for the extensions that step aside on its database."""
    lacking = sorted({m for e in extensions for m in missing[e.name]})
    which = f"migration {lacking[0]}" if len(lacking) == 1 else f"migrations {', '.join(lacking)}"
    names = ", ".join(e.name for e in extensions)
    return (
        f"this database lacks cairnq's {which}: {names} step aside until it has them "
        "(run `cairnq migrate`)"
    )


class LedgerWatch(Part):
    """Reads the migration ledger before the first claim and every 30 s, keeping
    ``Ready`` current; logs one line for the extensions that step aside (but those
    that say so themselves, ``Extension.says_when_missing``)."""

    name = "ledger"

    def __init__(
        self, backend: Backend, ready: Ready, *, report: ErrorHook, worker_id: str
    ) -> None:
        self.backend = backend
        self.ready = ready
        self.worker_id = worker_id
        self.job = PeriodicJob(
            "cairnq.ledger",
            self.look,
            interval_ms=LEDGER_LOOK_MS,
            on_error=report,
            phase="ledger",
            context={"worker_id": worker_id},
        )

    async def prepare(self) -> None:
        await self.look()

    async def look(self) -> None:
        """Read the ledger now."""
        applied = await self.backend.arun(kernel.applied_migrations(), write=False)
        aside = [e for e in self.ready.note(applied) if not e.says_when_missing]
        if aside:
            line = step_aside_line(aside, self.ready.missing)
            log.info(line, extra={"worker_id": self.worker_id})


def points(
    extensions: Sequence[Extension], worker: WorkerView, ready: Ready | None = None
) -> Points:
    """The kernel hooks of ``extensions`` in one run of ``worker``, compiled in their order.

    Each hook keeps its extension's ``in_use`` gate, and with ``ready`` runs only while
    its extension is ready; an extension with no hook adds nothing, so a worker whose
    extensions plug nothing in claims and settles as the kernel alone.
    """
    claim_filters, draw_claimers, attempt_end, task_end, claimed = [], [], [], [], []
    settling: list[Settling] = []
    for extension in extensions:
        hooks = extension.hooks(worker)
        in_use = hooks.in_use if ready is None else ready.gate(extension, hooks.in_use)
        if hooks.claim_filter is not None:
            claim_filters.append((hooks.claim_filter, in_use))
        if hooks.draw_claimer is not None:
            draw_claimers.append((hooks.draw_claimer, in_use))
        if hooks.attempt_end is not None:
            attempt_end.append((hooks.attempt_end, hooks.before_recover, in_use))
            if hooks.settling:
                settling.append(Settling(hooks.attempt_end, hooks.settling))
        elif hooks.before_recover is not None:
            raise InvalidArgument(
                f"extension {extension.name}: before_recover without attempt_end reaches nothing"
            )
        if hooks.task_end is not None:
            task_end.append((hooks.task_end, in_use, hooks.task_end_for))
        if hooks.claimed is not None:
            claimed.append((hooks.claimed, in_use))
    return Points(
        claim_filters=tuple(claim_filters),
        draw_claimers=tuple(draw_claimers),
        attempt_end=tuple(attempt_end),
        task_end=tuple(task_end),
        settling=tuple(settling),
        claimed=tuple(claimed),
    )


class Endings:
    """The ``Points`` of the writes that end tasks or attempts outside a worker run
    (a client's cancels and replacing submits, a store's settlements), compiled once
    from the ``ending_hooks`` of cairnq's own extensions and then ``extensions``.

    Each hook runs only while its extension is ready and its ``in_use`` gate says
    so. Readiness is read from the migration ledger by the caller: ``stale()`` says
    when (at most once a second while some extension with a hook is not ready;
    never once all are), ``note`` records what the ledger holds. With no hook at
    all ``points`` is ``NO_POINTS``.

    Args:
        extensions: Those besides cairnq's own (a client's), checked with them.
        readiness: The ``Readiness`` of an extension by name, shared with what else
            reads it (the client's); by default one of its own per extension.

    Raises:
        InvalidExtension: two extensions share a name, a migration or a table.
        InvalidArgument: one is no ``Extension``.
    """

    def __init__(
        self,
        extensions: Sequence[Extension] = (),
        readiness: Callable[[str], Readiness] | None = None,
    ) -> None:
        watched: list[tuple[Extension, Readiness]] = []
        attempt_end, task_end = [], []
        for extension in for_worker(extensions, ()):
            hooks = extension.ending_hooks()
            if hooks.attempt_end is None and hooks.task_end is None:
                continue
            ready = Readiness() if readiness is None else readiness(extension.name)
            watched.append((extension, ready))
            in_use = _when_ready(ready, hooks.in_use)
            if hooks.attempt_end is not None:
                attempt_end.append((hooks.attempt_end, None, in_use))
            if hooks.task_end is not None:
                task_end.append((hooks.task_end, in_use, hooks.task_end_for))
        self._watched = tuple(watched)
        self.points = (
            Points(attempt_end=tuple(attempt_end), task_end=tuple(task_end))
            if watched
            else kernel.NO_POINTS
        )

    def stale(self) -> bool:
        """Whether the ledger should be read (``note``) before ``points`` is used."""
        return any(ready.stale() for _, ready in self._watched)

    def note(self, applied: Collection[str]) -> Points:
        """Record which extensions are ready on a ledger holding ``applied``; ``points``."""
        for extension, ready in self._watched:
            if ready.stale():
                ready.note(not extension.missing(applied))
        return self.points


def _when_ready(ready: Readiness, in_use: InUse) -> InUse:
    return lambda: ready.ready and in_use()
