"""Extensions: each feature's tables, migrations, words, kernel hooks and worker parts,
declared alike.

A worker's run compiles its extensions' (by default ``builtins()``) hooks into one
``kernel.points.Points`` (``points``), which its claimer and settlements run, and
asks ``components`` for their parts, which it drives with the kernel's own parts in
one lifecycle. A client and a store compile their extensions' ``ending_hooks`` into
the ``Points`` of the writes they end tasks with (``Endings``).

What a hook yields is the protocol's: ``Call`` (one statement by name, with its
parameters; ``NOW`` for the database's clock), inside an ``Op``, which gets back
``Row``s; an ``attempt_end`` hook is given ``AttemptEnd``s (or, in a recovery, a
``Recovered``).

An extension outside cairnq is declared the same way, with the ``package`` that
holds its SQL; ``install`` checks it and adds its statements and migrations to
the process (``CairnQ(extensions=...)``, ``Worker(extensions=...)`` and the
command line's ``--extension`` call it). A worker runs the built-ins, its client's
extensions and its own (``for_worker``). Its ``namespace`` (a class built with the
client, a ``ClientView``; ``sync_namespace`` with a ``SyncClientView``) is what
``cq.extension(TheExtension)`` gives. ``docs/writing-an-extension.md`` walks
through one.

cairnq's own are here too, each taking its worker options:
``Worker(cq, extensions=[Limits([...]), Snoozing(max_snoozes=5), History(record=False),
Schedules(evaluate=False)])`` (``Pauses``, ``Presence``, ``Workflows``, ``Steps`` and
``Waits`` take none).
"""

from __future__ import annotations

from ..kernel.points import AttemptEnd, Recovered
from ..protocol.steps import NOW, Call, Op, Row
from ._base import (
    BeforeIdle,
    Component,
    Extension,
    Hooks,
    Option,
    Part,
    SweepTurns,
    TaskRows,
    WorkerView,
)
from ._folders import install
from ._namespace import ClientView, SyncClientView
from ._registry import (
    Endings,
    LedgerWatch,
    Ready,
    builtins,
    check,
    components,
    for_worker,
    options,
    points,
    signals,
    task_options,
    waiting_counts,
    waiting_extensions,
)
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

__all__ = [
    "NOW",
    "Batches",
    "AttemptLogs",
    "History",
    "Limits",
    "Pauses",
    "Policies",
    "Presence",
    "Schedules",
    "Search",
    "Snoozing",
    "Steps",
    "Uniqueness",
    "Waits",
    "Workflows",
    "AttemptEnd",
    "BeforeIdle",
    "Call",
    "ClientView",
    "Component",
    "Endings",
    "Extension",
    "Hooks",
    "LedgerWatch",
    "Op",
    "Option",
    "Part",
    "Ready",
    "Recovered",
    "Row",
    "SweepTurns",
    "SyncClientView",
    "TaskRows",
    "WorkerView",
    "builtins",
    "check",
    "components",
    "install",
    "for_worker",
    "options",
    "waiting_counts",
    "waiting_extensions",
    "points",
    "signals",
    "task_options",
]
