"""What an extension is: one feature's tables, migrations, words, kernel hooks and
background parts.

The kernel never imports an extension. A worker asks the registry (``_registry``)
to compile its extensions' hooks (``Hooks``) into the ``kernel.points.Points`` its
claims and settlements run, and for their components, which it drives with one
lifecycle; a test asks each extension for its tables, migrations and words.

Readiness is one rule, ``Extension.missing``: an extension is ready on a database
whose migration ledger holds every migration it owns (but those it marks
``optional``) and every one it needs. A worker that declared something the
extension stores (limits) refuses to start on a database where it is not ready
(``Extension.refusal``, a ``SchemaIncomplete``); otherwise the extension's hooks
stay out (``_registry.Ready``) and its parts step aside and look again later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from .. import kernel
from ..backends import Backend
from ..errors import InvalidArgument, SchemaIncomplete
from ..kernel.periodic import ErrorHook, NamedLease, PeriodicJob
from ..kernel.points import (
    AttemptEndHook,
    BeforeRecover,
    Claimed,
    ClaimFilter,
    DrawClaimer,
    InUse,
    TaskEnd,
    TaskEndFor,
    always,
)
from ..protocol.steps import Op
from ._context import Signal

if TYPE_CHECKING:
    from .._json import JsonCodec

TaskRows = Literal["trigger", "swept", "not_task_keyed"]
"""How an extension table's rows about a task go when the task's row goes: a delete
trigger on ``cairnq_tasks`` forgets them, a sweep does, or the table holds no
task-keyed rows."""


class Job(Protocol):
    """What a component runs in the background: a ``PeriodicJob``, or a part that
    starts and stops like one."""

    def start(self) -> None: ...

    async def stop(self, *, wait: bool = True) -> None:
        """Stop; ``wait=False`` cancels a run in progress instead of letting it finish."""


class Component(Protocol):
    """A background part of a worker; the worker's ``Lifecycle`` drives every one the same way.

    Attributes:
        name: What errors and start-up warnings name it by (``"schedules"``).
        job: Started after every component is prepared, stopped in reverse
            order; ``None`` for none (read after ``prepare``).
        stops_after_drain: Stop only once in-flight calls have drained.
    """

    @property
    def name(self) -> str: ...

    @property
    def job(self) -> Job | None: ...

    @property
    def stops_after_drain(self) -> bool: ...

    async def prepare(self) -> None:
        """Before the first claim; raising refuses the worker's start."""

    async def close(self) -> None:
        """After its job stopped (also when the start was refused after its prepare)."""


@runtime_checkable
class BeforeIdle(Protocol):
    """A component with work that becomes due without a claim seeing it first (the
    workflows' sweep): a worker run ``until_idle`` asks it before it stops."""

    async def before_idle(self) -> bool:
        """Nothing is due and nothing runs: make due what would become due without
        another claim (the workflows release parked tasks whose dependencies ended, the
        batches submit the callbacks of batches whose members ended). ``True`` when it
        changed something, so the worker claims again before it judges idleness. A
        ``DatabaseError`` that may pass (``retryable``) is reported and the worker claims
        again, a few times at most; any other error is reported and counts as ``False``."""
        ...


class Part:
    """Defaults for a ``Component``: no job, nothing to prepare or close."""

    name = "part"
    job: Job | None = None
    stops_after_drain = False

    async def prepare(self) -> None:
        return None

    async def close(self) -> None:
        return None


class Jobs:
    """Several jobs started and stopped as one, in order (stopped in reverse)."""

    def __init__(self, *jobs: Job) -> None:
        self.jobs = jobs

    def start(self) -> None:
        for job in self.jobs:
            job.start()

    async def stop(self, *, wait: bool = True) -> None:
        for job in reversed(self.jobs):
            await job.stop(wait=wait)


# The most turns ``SweepTurns.changed_since_asked`` runs in a row while each finds more.
IDLE_SWEEP_TURNS = 100


class SweepTurns:
    """An extension's sweep, one turn at a time in this process (its job's turns and a
    run's ``before_idle``), counting what the turns changed.

    ``sweep`` runs one bounded turn: what it changed (tasks made due, batches made
    done) and whether it read as many rows as its bound (more may wait). A second
    sweep beside a first would wait on the first's locks and find nothing, though the
    first made work due: ``changed_since_asked`` waits for it and counts it. Sweeps in
    other processes are not counted: one that makes work due just as this process
    judges itself idle leaves that work to the next run.
    """

    def __init__(self, sweep: Callable[[], Awaitable[tuple[int, bool]]]) -> None:
        self._sweep = sweep
        self._turn = asyncio.Lock()
        self.changed = 0
        self._seen = 0

    async def run(self) -> int:
        """One turn of the sweep (after any turn in progress); what it changed."""
        async with self._turn:
            changed, _ = await self._sweep()
            self.changed += changed
            return changed

    async def changed_since_asked(self) -> bool:
        """Sweep until a turn finds no more (at most ``IDLE_SWEEP_TURNS`` turns); whether
        any turn changed something since the last ask (a job's turn too: it may have made
        work due after a claim looked; the first ask counts from the run's start)."""
        async with self._turn:
            for _ in range(IDLE_SWEEP_TURNS):
                changed, more = await self._sweep()
                self.changed += changed
                if not more:
                    break
        seen, self._seen = self._seen, self.changed
        return self.changed != seen


def sweep_and_look(
    lease_name: str,
    backend: Backend,
    *,
    holder: str,
    sweep: Callable[[], Awaitable[object]],
    look: Callable[[], Awaitable[object]],
    ready: Callable[[], Awaitable[bool]],
    report: ErrorHook,
    phase: str,
    interval_ms: int,
    lease_ttl_ms: int,
) -> tuple[PeriodicJob, PeriodicJob]:
    """An extension's sweep and its look, both every ``interval_ms``.

    The sweep runs in one process at a time (the named lease ``lease_name``), first
    at once, and its turns wait on ``ready`` (so where the extension steps aside it
    neither takes the lease nor says it runs without one). The look runs in every
    process, without a lease, as ``<lease_name>.look``: it keeps the extension's
    ``in_use`` gate current.

    Returns:
        ``(sweep_job, look_job)``; start the look first (``Jobs(look_job, sweep_job)``).
    """
    context = {"worker_id": holder}
    sweep_job = PeriodicJob(
        lease_name,
        sweep,
        interval_ms=interval_ms,
        first_delay_ms=0,
        on_error=report,
        lease=NamedLease(backend, holder=holder, ttl_ms=lease_ttl_ms),
        phase=phase,
        context=context,
        when=ready,
    )
    look_job = PeriodicJob(
        f"{lease_name}.look",
        look,
        interval_ms=interval_ms,
        on_error=report,
        phase=phase,
        context=context,
    )
    return sweep_job, look_job


@dataclass(frozen=True)
class Hooks:
    """What an extension plugs into the kernel's operations (``kernel.points``).

    A field left ``None`` costs nothing: it is not compiled into the worker's
    ``Points``. Each hook given runs only while ``in_use`` says so, a function read
    per claim or settlement (an attribute read, never a statement), which the
    extension's component keeps current.

    Attributes:
        claim_filter: Before a claim and its probe: the queues and draws left.
        draw_claimer: Claims the draws it governs, inside the claim's transaction.
        before_recover: Inside a recovery's transaction, before it; its value
            reaches ``attempt_end``.
        attempt_end: Inside the transaction that ended attempts (settlements,
            releases, snoozes, recoveries).
        task_end: Inside the transaction that ended tasks, on their rows.
        task_end_for: Whether ``task_end`` may have something to do for the tasks of
            these ids, given those an operation is about to end where it knows them
            before it runs (a settlement's, a cancel's); read per operation as
            ``in_use`` is, never a statement. ``None``: whenever ``in_use`` says so.
        in_use: Whether the extension has something to do now.
        claimed: Right after a worker's claim, in a read transaction of its own: the
            claimed rows the worker runs (those it leaves out it settled, unrun), or a
            ``kernel.points.ThenWrite`` of the write that decides them.
        settling: ``attempt_end``'s write made by the settling statement itself: the
            extension's variant of each kernel settling statement it covers, by the
            kernel's name (``kernel.points.Settling``); a settlement it does not
            cover runs ``attempt_end`` after its statement.
    """

    claim_filter: ClaimFilter | None = None
    draw_claimer: DrawClaimer | None = None
    before_recover: BeforeRecover | None = None
    attempt_end: AttemptEndHook | None = None
    task_end: TaskEnd | None = None
    task_end_for: TaskEndFor | None = None
    in_use: InUse = always
    settling: Mapping[str, str] | None = None
    claimed: Claimed | None = None


@dataclass(frozen=True)
class Option:
    """A keyword an extension takes from ``Worker(...)`` (``Extension.options``) or from
    ``@worker.task(...)`` (``Extension.task_options``).

    Attributes:
        default: Its value when the keyword is not given.
        check: Turns a given value (or ``default``) into the one the extension reads,
            raising ``InvalidArgument`` for a bad one: the worker calls it when it is
            built, so a bad option refuses the construction before anything is written.
    """

    default: object
    check: Callable[[Any], object]


@dataclass(frozen=True, eq=False)
class WorkerView:
    """What one run of a worker shows its extensions' hooks and components.

    One view per run, compared by identity: an extension may key what its hooks
    and components of one run share by it (the pauses' set). ``wake`` wakes the
    claimer (something claimable may have changed). ``options`` holds the worker's
    extension options, checked (``Extension.options``: every option of every
    extension of the worker, by name); each extension builds its per-run state from
    its own. ``client`` is the worker's client (a ``CairnQ``, a layer above: an
    extension types what it reads of it).
    """

    backend: Backend
    worker_id: str
    queues: Sequence[str]
    concurrency: int
    report: ErrorHook
    task_names: Sequence[str]
    codec: JsonCodec
    client: object
    options: Mapping[str, object]
    wake: Callable[[], None]


class Extension:
    """One feature: its migrations, its tables, its words and its worker parts.

    Built-in features and third-party ones are declared alike; the kernel never
    imports one.

    Attributes:
        name: The feature's name (``"limits"``).
        migrations: The x-migrations it owns, in order of application.
        needs: Migrations it needs that another extension owns.
        optional: Those of its own migrations it works without (a later one
            that only changes how its rows are kept); readiness ignores them.
        tables: Its tables, each with how its rows about a task are forgotten.
        words: What it is called in code; the kernel's modules name none of them
            (``tests/test_kernel_names.py``).
        cli: The module that adds its ``cairnq`` commands (``add_commands``), or
            ``None``. The CLI, above the extensions, imports it by this name.
        pages: The module of its dashboard pages (``pages``), or ``None``; their
            templates are in the ``templates/`` folder of the extension's package.
            The dashboard imports it by this name.
        says_when_missing: Its own part says in one line that it steps aside
            where it is not ready; the others are named in the worker's one
            shared line (``LedgerWatch``).
        options: Its worker options, by name, each with its default and check: given
            to its constructor (``Audit(audit=False)``; cairnq's own name theirs,
            ``Limits([...])``, ``Snoozing(max_snoozes=5)``, ``History(record=False)``),
            the instance given to ``Worker(extensions=[...])`` or to its client. The
            worker hands their checked values to the extension's hooks and components
            (``WorkerView.options``). ``Worker(audit=False)`` still works for one
            release, with a ``CairnQDeprecationWarning``.
        task_options: The keywords it takes from ``@worker.task(...)`` and
            ``worker.register(...)``, checked when the handler is registered.
        package: For an extension outside cairnq, the import name of the package
            whose ``sql/<dialect>/`` and ``migrations/<dialect>/`` folders hold its
            statements and migrations (``install`` adds them to the process's
            namespace) and whose ``templates/`` folder holds its page templates;
            ``None`` for cairnq's own, which the package ships.
        namespace: The class of its client namespace on ``CairnQ``, built with the
            client (a ``ClientView``), once per client: ``cq.extension(Audit)``.
            cairnq's own have static ones instead (``cq.limits``).
        sync_namespace: The same on ``SyncCairnQ`` (a ``SyncClientView``), whose
            methods block.
        settings: The worker options this instance was given, checked, by name
            (those not given take their default).
    """

    name: ClassVar[str]
    migrations: ClassVar[Sequence[str]] = ()
    needs: ClassVar[Sequence[str]] = ()
    optional: ClassVar[Sequence[str]] = ()
    tables: ClassVar[Mapping[str, TaskRows]] = {}
    words: ClassVar[Sequence[str]] = ()
    cli: ClassVar[str | None] = None
    pages: ClassVar[str | None] = None
    says_when_missing: ClassVar[bool] = False
    package: ClassVar[str | None] = None
    options: ClassVar[Mapping[str, Option]] = {}
    task_options: ClassVar[Mapping[str, Option]] = {}
    namespace: ClassVar[Callable[..., object] | None] = None
    sync_namespace: ClassVar[Callable[..., object] | None] = None
    settings: Mapping[str, object] = MappingProxyType({})

    def __init__(self, **settings: object) -> None:
        """An extension with its worker options (``options``), by name.

        Raises:
            TypeError: a keyword it declares no option for.
            InvalidArgument: a value its option's check refuses.

        Example::

            worker = Worker(cq, extensions=[Audit(audit=False)])
        """
        self.settings = settled(self, settings)

    def __repr__(self) -> str:
        return f"<Extension {self.name}>"

    def missing(self, applied: Collection[str]) -> tuple[str, ...]:
        """The migrations it owns (``optional`` aside) or needs that ``applied`` lacks:
        none when it is ready."""
        wanted = (*(m for m in self.migrations if m not in self.optional), *self.needs)
        return tuple(m for m in wanted if m not in applied)

    async def amissing(self, backend: Backend) -> tuple[str, ...]:
        """``missing`` on ``backend``'s migration ledger, read now."""
        applied = await backend.arun(kernel.applied_migrations(), write=False)
        return self.missing(applied)

    def refusal(self, missing: Sequence[str], declared: str) -> SchemaIncomplete:
        """The error a worker that ``declared`` what this extension stores raises on a
        database that lacks ``missing``."""
        which = (
            f"migration {missing[0]}" if len(missing) == 1 else f"migrations {', '.join(missing)}"
        )
        return SchemaIncomplete(
            f"this worker declares {declared} but the database lacks cairnq's {self.name} "
            f"({which}); run `cairnq migrate` (or open the worker with migrate=True)",
            missing=tuple(missing),
        )

    def hooks(self, worker: WorkerView) -> Hooks:
        """What it plugs into the kernel's operations in one run of ``worker`` (nothing,
        by default); compiled with the other extensions' into one ``Points``."""
        return Hooks()

    def ending_hooks(self) -> Hooks:
        """What it plugs into the writes that end tasks or attempts outside a worker
        run: a client's cancels and replacing submits, a store's settlements (nothing,
        by default). Only ``attempt_end``, ``task_end`` and ``in_use`` are read; each
        hook runs only while the extension is ready (``_registry.Endings``)."""
        return Hooks()

    def components(self, worker: WorkerView) -> Sequence[Component]:
        """Its background parts in one run of ``worker``, in start order (none, by default)."""
        return ()

    def parked(self, queue: str | None) -> Op[dict[str, int]] | None:
        """What counts the tasks it holds **parked** now, per queue (of ``queue`` alone
        when given), or ``None`` when it parks none (the default).

        A parked task is ``queued`` and not yet due because it waits on something this
        extension holds (a dependency, an event, a sleep), not on a delay its submit
        asked for. Backpressure leaves parked tasks out of a queue's depth
        (``docs/backpressure.md``). Run only on a database where the extension is ready.
        """
        return None

    def signals(self) -> Mapping[type[BaseException], Signal]:
        """The handler signals it settles (none, by default): each exception class a
        handler may raise, with the ``Signal`` that settles the call instead of failing it."""
        return {}


def settled(extension: Extension, given: Mapping[str, object]) -> Mapping[str, object]:
    """``given``, the worker options of ``extension``'s constructor, each checked
    (``Option.check``); read-only.

    Raises:
        TypeError: a keyword ``extension`` declares no option for.
        InvalidArgument: a value its option's check refuses.
    """
    checked: dict[str, object] = {}
    for name, value in given.items():
        option = extension.options.get(name)
        if option is None:
            raise TypeError(
                f"{type(extension).__qualname__}() got an unexpected keyword argument {name!r}"
            )
        checked[name] = option.check(value)
    return MappingProxyType(checked)


def listed(extensions: object) -> list[Extension]:
    """``extensions`` as a client, a worker or ``migrate`` is given them, as a list.

    Raises:
        InvalidArgument: ``extensions`` is no list of them: ``None``, a string, or one
            extension alone (each item is checked later, by ``check``).
    """
    if isinstance(extensions, Extension):
        raise InvalidArgument(
            f"extensions takes a list: extensions=[{type(extensions).__name__}(...)]"
        )
    if isinstance(extensions, (str, bytes)) or not isinstance(extensions, Iterable):
        raise InvalidArgument(
            f"extensions takes a list of Extension instances, not {extensions!r} "
            "(leave it out for none)"
        )
    return list(extensions)
