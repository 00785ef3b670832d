"""Task policies one submit gives its task: a run timeout (``timeout=``), an expiry
(``expires_in=``/``deadline=``) and a retry policy (``retry=``), kept in
``cairnq_policies_tasks`` (migration ``x0020_policies.sql``, which this extension owns).

The client stores them with the task (``_ops.submit``); each cairnq worker looks up
the policies of what it claims once any submit stored one (``_gate``): a task past
its expiry is handed back unrun and canceled with the reason ``expired``, and the
others run under their submit's timeout and retry policy. The worker's job cancels
queued tasks past their expiry that no claim reached. ``docs/policies.md`` says
what is guaranteed and what a reference SDK worker does.

A handler's own policies (``@worker.task(retry=..., max_attempts=..., timeout=...)``,
``TaskDef(retry=...)``) need no table: the worker holds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar
from weakref import WeakKeyDictionary

from ..._lazy import exports
from .._base import Component, Extension, Hooks, TaskRows, WorkerView

if TYPE_CHECKING:
    from ._gate import PoliciesComponent as PoliciesComponent
    from ._gate import PolicyGate
    from ._ops import EXPIRED, TaskPolicy
else:
    # The operations and the worker's gate are imported when first used.
    __getattr__, __dir__ = exports(
        __name__,
        {
            "EXPIRED": "._ops",
            "PoliciesComponent": "._gate",
            "PolicyGate": "._gate",
            "TaskPolicy": "._ops",
        },
    )

__all__ = ["EXPIRED", "Policies", "PolicyGate", "TaskPolicy"]


class Policies(Extension):
    """The task policies extension: per-submit timeouts, expiries and retry policies."""

    name = "policies"
    migrations = ("x0020_policies.sql",)
    tables: ClassVar[Mapping[str, TaskRows]] = {
        "cairnq_policies_tasks": "trigger",
        "cairnq_policies_use": "not_task_keyed",
    }
    words = ("cairnq_policies_tasks", "cairnq_policies_use", "expires_in", "expires_at_ms")
    cli = "cairnq.extensions.policies._surfaces.cli"
    pages = "cairnq.extensions.policies._surfaces.pages"

    def __init__(self) -> None:
        self._runs: WeakKeyDictionary[WorkerView, PolicyGate] = WeakKeyDictionary()

    def gate(self, worker: WorkerView) -> PolicyGate:
        """The policies of one run of ``worker``, which its claim hook and its part share."""
        found = self._runs.get(worker)
        if found is None:
            from ._gate import PolicyGate

            found = self._runs[worker] = PolicyGate(
                worker.backend, worker.client, worker.worker_id, worker.report
            )
        return found

    def hooks(self, worker: WorkerView) -> Hooks:
        gate = self.gate(worker)
        return Hooks(claimed=gate.claimed, in_use=gate.in_use)

    def components(self, worker: WorkerView) -> Sequence[Component]:
        from ._gate import PoliciesComponent

        return (PoliciesComponent(self.gate(worker), worker),)
