"""What the dashboard's pages need of the application serving them.

``Pages`` takes any ``PageHost``; ``DashboardApp`` is the one cairnq builds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..models import Task, TaskPage
from ._http import Security
from ._throttle import ListThrottle

if TYPE_CHECKING:
    from ..client import CairnQ

Redact = Callable[[str, Any, Task], Any]


class PageHost(Protocol):
    """The application a page answers for: its client, its settings and its shared reads."""

    client: CairnQ
    # True: a Metrics made on the first scrape (then that Metrics); False: no /metrics.
    metrics: Any
    read_only: bool
    title: str
    label: str
    refresh_ms: int
    worker_window_ms: int
    page_size: int
    security: Security
    # Task listings, one at a time, equal ones within a refresh interval answered once.
    lists: ListThrottle[TaskPage]
    # The overview's and workers' reads, shared the same way.
    reads: ListThrottle[Any]

    def csrf_token(self) -> str:
        """A token for forms."""
        ...

    def safe_redact(self, field_name: str, value: Any, task: Task) -> Any:
        """The ``redact`` hook's answer; the mask when the hook raises."""
        ...

    async def ensure_open(self) -> None:
        """Open the client on the first request that reads."""
        ...
