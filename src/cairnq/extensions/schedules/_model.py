"""What a schedule is: its options and definition (each checked once, before anything is
stored) and its state."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypedDict

from ... import _checks
from ..._json import JsonCodec
from ...durations import duration_ms
from ...errors import InvalidArgument
from ._timing import Timing

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "CATCH_UP_POLICIES",
    "OUTCOMES",
    "OVERLAPS",
    "Schedule",
    "ScheduleKeywords",
    "ScheduleOptions",
    "ScheduleSlot",
    "ScheduleSpec",
    "Span",
    "schedule_options",
]

CatchUpPolicy = Literal["all", "latest"]
Overlap = Literal["allow", "skip", "queue"]
Outcome = Literal["enqueued", "missed", "superseded", "overlap", "paused"]

CATCH_UP_POLICIES: tuple[CatchUpPolicy, ...] = ("all", "latest")
OVERLAPS: tuple[Overlap, ...] = ("allow", "skip", "queue")
OUTCOMES: tuple[Outcome, ...] = ("enqueued", "missed", "superseded", "overlap", "paused")
MAX_CATCH_UP_MS = 366 * 86_400_000

Span = str | int | float | datetime.timedelta
"""A duration: text such as ``"90s"`` or ``"1h30m"``, seconds as a number, or a ``timedelta``."""


def _ms(value: Any, what: str, *, low: int) -> int:
    """A duration: seconds as a number, a string with a unit (``"1h"``) or a ``timedelta``."""
    return duration_ms(value, what, low_ms=low, high_ms=MAX_CATCH_UP_MS)


class ScheduleKeywords(TypedDict, total=False):
    """A schedule's options as keywords: ``**options: Unpack[ScheduleKeywords]``.

    The names and types of ``ScheduleOptions``'s fields, which documents each;
    ``tests/test_schedule_options.py`` keeps the two the same.
    """

    cron: str | None
    every: Span | None
    tz: str | None
    payload: Any
    queue: str | None
    priority: int
    max_attempts: int
    metadata: Any
    catch_up: Span
    catch_up_policy: str
    overlap: str
    jitter: Span | None


class _Checked(NamedTuple):
    """What ``ScheduleOptions`` checked, parsed."""

    timing: Timing
    queue: str | None
    priority: int
    max_attempts: int
    catch_up_ms: int
    catch_up_policy: CatchUpPolicy
    overlap: Overlap
    jitter_ms: int


@dataclass(frozen=True)
class ScheduleOptions:
    """When a schedule's slots fall and what each slot's task gets, checked when built.

    Every way of declaring a schedule takes these options, as this object or as
    keywords of the same names (``ScheduleKeywords``): ``cq.schedules.add``,
    ``@worker.periodic``, ``worker.schedule`` and ``ScheduleSpec.build``. Keywords
    given beside an object replace its fields. Each entry refuses a bad option here,
    with the same message.

    Attributes:
        cron: A cron expression: 5 fields, or 6 with seconds first, or an alias
            (``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, ``@yearly``);
            needs the ``cron`` extra. Give ``cron`` or ``every``.
        every: An interval (``"90s"``, ``"1h"``, seconds as a number or a ``timedelta``),
            its slots counted from the Unix epoch.
        tz: The time zone cron slots are read in (``"UTC"``). A local time that
            does not exist (spring forward) runs once at the first instant after
            the gap; one that occurs twice (fall back) runs once, the first time.
        payload: Each task's payload, any JSON value (``{}``); the client or worker
            storing the schedule encodes it.
        queue: Each task's queue; ``None``: ``"default"`` for a client, the
            worker's first queue for a worker.
        priority: Each task's priority: higher runs first (0).
        max_attempts: Runs allowed to each task, counting crashed ones (3).
        metadata: Each task's metadata, any JSON value (``{}``).
        catch_up: How late a slot may still be submitted, after downtime (1 h).
            Older slots are recorded as missed, never submitted.
        catch_up_policy: ``"all"`` submits every slot inside ``catch_up``, oldest
            first; ``"latest"`` only the newest, recording the others as superseded.
        overlap: ``"allow"``; ``"skip"`` a slot while the previous slot's task is
            queued or running; ``"queue"``: the slot waits until it ends.
        jitter: Each task runs up to this long after its slot (a delay derived
            from the slot, the same in every process); shorter than ``every``.

    Raises:
        InvalidArgument: a bad cron expression, time zone, interval or option
            (``ScheduleOptions(...)`` raises it, and so does each entry given it).

    Example::

        nightly = ScheduleOptions(cron="0 2 * * *", tz="Europe/Paris", catch_up="6h")
        await cq.schedules.add("nightly-report", "report.build", nightly)
        worker.schedule("nightly-export", "export.run", nightly, queue="exports")
    """

    cron: str | None = None
    every: Span | None = None
    tz: str | None = None
    payload: Any = None
    queue: str | None = None
    priority: int = 0
    max_attempts: int = 3
    metadata: Any = None
    catch_up: Span = "1h"
    catch_up_policy: str = "all"
    overlap: str = "allow"
    jitter: Span | None = None

    def __post_init__(self) -> None:
        _ = self._checked

    @cached_property
    def _checked(self) -> _Checked:
        """The one check of the options; their JSON is the storing client's codec's to encode."""
        if self.catch_up_policy not in CATCH_UP_POLICIES:
            raise InvalidArgument(
                f"catch_up_policy must be one of {', '.join(CATCH_UP_POLICIES)}; "
                f"got {self.catch_up_policy!r}"
            )
        if self.overlap not in OVERLAPS:
            raise InvalidArgument(
                f"overlap must be one of {', '.join(OVERLAPS)}; got {self.overlap!r}"
            )
        timing = Timing.parse(cron=self.cron, every=self.every, tz=self.tz)
        jitter_ms = 0 if self.jitter is None else _ms(self.jitter, "jitter", low=0)
        if timing.every_ms is not None and jitter_ms >= timing.every_ms:
            raise InvalidArgument(
                f"jitter must be shorter than the interval ({timing.describe()}); "
                f"got {self.jitter!r}"
            )
        return _Checked(
            timing=timing,
            queue=_checks.check_text(self.queue, "queue", optional=True),
            priority=_checks.check_int(self.priority, "priority", low=-_checks.MAX_INT4 - 1),
            max_attempts=_checks.check_int(self.max_attempts, "max_attempts", low=1),
            catch_up_ms=_ms(self.catch_up, "catch_up", low=1_000),
            catch_up_policy=self.catch_up_policy,
            overlap=self.overlap,
            jitter_ms=jitter_ms,
        )


def schedule_options(
    options: ScheduleOptions | None, keywords: ScheduleKeywords
) -> ScheduleOptions:
    """``options`` with ``keywords`` replacing its fields (the defaults' when ``None``), checked.

    Raises:
        InvalidArgument: ``options`` is not a ``ScheduleOptions``, or the result is
            refused (see ``ScheduleOptions``).
    """
    if options is None:
        return ScheduleOptions(**keywords)
    if not isinstance(options, ScheduleOptions):
        raise InvalidArgument(
            "schedule options must be a ScheduleOptions, or keywords (**options); "
            f"got {type(options).__name__}"
        )
    return dataclasses.replace(options, **keywords) if keywords else options


@dataclass(frozen=True)
class ScheduleSpec:
    """A validated schedule definition, its JSON already encoded: what gets stored."""

    name: str
    task: str
    timing: Timing
    queue: str
    payload: str
    metadata: str
    priority: int
    max_attempts: int
    catch_up_ms: int
    catch_up_policy: CatchUpPolicy
    overlap: Overlap
    jitter_ms: int
    paused: bool

    @classmethod
    def build(
        cls,
        codec: JsonCodec,
        name: Any,
        task: Any,
        options: ScheduleOptions | None = None,
        *,
        paused: Any = False,
        **keywords: Unpack[ScheduleKeywords],
    ) -> ScheduleSpec:
        """Validate a definition: its name, task and options (queue ``"default"`` when ``None``).

        Args:
            codec: Encodes the payload (with its ``codec=``, if any) and metadata.
            name: The schedule's name.
            task: The task name each slot submits.
            options: The options (``ScheduleOptions``); ``keywords`` replace its fields.
            paused: Whether it is stored paused.
            **keywords: The options as keywords (``ScheduleKeywords``).

        Returns:
            The definition, ready to store.

        Raises:
            InvalidArgument: a bad name or option (see ``ScheduleOptions``).
            SerializationError: the payload or metadata is not portable JSON.
        """
        given = schedule_options(options, keywords)
        checked = given._checked
        if not isinstance(paused, bool):
            raise InvalidArgument(f"paused must be True or False; got {paused!r}")
        payload, metadata = given.payload, given.metadata
        return cls(
            name=_checks.check_text(name, "schedule name") or "",
            task=_checks.check_text(task, "task name") or "",
            timing=checked.timing,
            queue=checked.queue or "default",
            payload="{}" if payload is None else codec.seal(payload, what="payload"),
            metadata=codec.encode({} if metadata is None else metadata, what="metadata"),
            priority=checked.priority,
            max_attempts=checked.max_attempts,
            catch_up_ms=checked.catch_up_ms,
            catch_up_policy=checked.catch_up_policy,
            overlap=checked.overlap,
            jitter_ms=checked.jitter_ms,
            paused=paused,
        )

    def params(self) -> dict[str, Any]:
        """The definition's columns, as ``schedule_insert`` / ``schedule_define`` take them."""
        return {
            "name": self.name,
            "cron": self.timing.cron,
            "every_ms": self.timing.every_ms,
            "tz": self.timing.tz,
            "task_name": self.task,
            "queue": self.queue,
            "payload": self.payload,
            "metadata": self.metadata,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
            "catch_up_ms": self.catch_up_ms,
            "catch_up_policy": self.catch_up_policy,
            "overlap": self.overlap,
            "jitter_ms": self.jitter_ms,
        }


@dataclass(frozen=True)
class Schedule:
    """A stored schedule and where it stands.

    Attributes:
        name: The schedule's name (unique in the database).
        task: The task name each slot submits, on ``queue``.
        cron: The cron expression (aliases expanded), or ``None`` for an interval.
        every_ms: The interval, or ``None`` for a cron expression.
        tz: The time zone cron slots are read in (``"UTC"`` for intervals).
        payload, metadata, priority, max_attempts: What each slot's task gets.
        catch_up_ms: How late a slot may still be enqueued; older missed slots are
            recorded as ``missed``.
        catch_up_policy: ``"all"`` (every slot inside ``catch_up_ms``, oldest first)
            or ``"latest"`` (only the newest; the others recorded as ``superseded``).
        overlap: ``"allow"``, ``"skip"`` (a slot due while the previous slot's task is
            queued or running is recorded as ``overlap``) or ``"queue"`` (it waits).
        jitter_ms: Each slot's task runs up to this long after its slot (the same
            delay whichever process submits it).
        paused: Paused schedules submit nothing; resuming skips the slots passed meanwhile.
        source: ``"code"`` (declared by a worker) or ``"api"`` (added by a client or
            the command line).
        cursor_ms: Every slot at or before this instant is decided.
        next_ms: The next slot to decide (``None``: none left).
        last_slot_ms, last_task_id, last_status: The latest slot that submitted a
            task, that task and its status (``None`` once purged).
        created_at_ms, updated_at_ms: When stored and last changed.
    """

    name: str
    task: str
    cron: str | None
    every_ms: int | None
    tz: str
    queue: str
    payload: Any
    metadata: Any
    priority: int
    max_attempts: int
    catch_up_ms: int
    catch_up_policy: str
    overlap: str
    jitter_ms: int
    paused: bool
    source: str
    cursor_ms: int
    next_ms: int | None
    last_slot_ms: int | None
    last_task_id: str | None
    last_status: str | None
    created_at_ms: int
    updated_at_ms: int

    @property
    def timing(self) -> Timing:
        """When the slots fall."""
        return Timing(cron=self.cron, every_ms=self.every_ms, tz=self.tz)

    @property
    def when(self) -> str:
        """The timing in words: ``"every 1m30s"`` or ``"*/5 * * * * (Europe/Paris)"``."""
        return self.timing.describe()

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Schedule:
        """Build from a ``cairnq_schedules`` row (``last_status`` when the read joins it)."""
        decode = JsonCodec.decode
        return cls(
            name=str(row["name"]),
            task=str(row["task_name"]),
            cron=row["cron"],
            every_ms=_opt_int(row["every_ms"]),
            tz=str(row["tz"]),
            queue=str(row["queue"]),
            payload=decode(row["payload"], what="payload"),
            metadata=decode(row["metadata"], what="metadata"),
            priority=int(row["priority"]),
            max_attempts=int(row["max_attempts"]),
            catch_up_ms=int(row["catch_up_ms"]),
            catch_up_policy=str(row["catch_up_policy"]),
            overlap=str(row["overlap"]),
            jitter_ms=int(row["jitter_ms"]),
            paused=bool(row["paused"]),
            source=str(row["source"]),
            cursor_ms=int(row["cursor_ms"]),
            next_ms=_opt_int(row["next_ms"]),
            last_slot_ms=_opt_int(row["last_slot_ms"]),
            last_task_id=row["last_task_id"],
            last_status=_joined(row, "last_status"),
            created_at_ms=int(row["created_at_ms"]),
            updated_at_ms=int(row["updated_at_ms"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON-ready), plus ``when``."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["when"] = self.when
        return out


@dataclass(frozen=True)
class ScheduleSlot:
    """The decision on one slot of a schedule, or on a range of skipped slots.

    Attributes:
        schedule: The schedule's name.
        slot_ms: The slot (the first slot of a range).
        through_ms: The last slot of a range; ``None`` for a single slot.
        slots: How many slots the row stands for (1 for a single slot; a count of
            a long range stops at 100,000).
        outcome: ``"enqueued"`` (``task_id`` is its task), ``"missed"`` (older than
            ``catch_up`` when evaluated), ``"superseded"`` (``catch_up_policy="latest"``
            ran a newer slot), ``"overlap"`` (``overlap="skip"``) or ``"paused"``.
        task_id, task_status: The task submitted and its status (``None`` once purged).
        recorded_at_ms: When the decision was made.
    """

    schedule: str
    slot_ms: int
    through_ms: int | None
    slots: int
    outcome: str
    task_id: str | None
    task_status: str | None
    recorded_at_ms: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ScheduleSlot:
        """Build from a ``cairnq_schedule_slots`` row joined with its task's status."""
        return cls(
            schedule=str(row["schedule"]),
            slot_ms=int(row["slot_ms"]),
            through_ms=_opt_int(row["through_ms"]),
            slots=int(row["slots"]),
            outcome=str(row["outcome"]),
            task_id=row["task_id"],
            task_status=row["task_status"],
            recorded_at_ms=int(row["recorded_at_ms"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON-ready)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _joined(row: Mapping[str, Any], column: str) -> Any:
    """A column only some reads join in; ``None`` where the read has none."""
    try:
        return row[column]
    except (KeyError, IndexError):  # sqlite3.Row raises IndexError for a missing name
        return None


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
