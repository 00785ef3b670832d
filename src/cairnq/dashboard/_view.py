"""What every page of the dashboard renders with: the request's ``View``, the
template environment (``render``) and how a task's fields read on a page.

Pages are Jinja2 templates (``templates/`` here and in each extension's package) with
autoescaping on: task names, queues, messages and JSON values are attacker-controlled
text and reach the page only escaped.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from ..durations import format_duration, format_instant
from ..models import Task
from ._extensions import EXTENSION_TEMPLATES
from ._host import Redact
from ._http import Incoming


@dataclass(frozen=True)
class View:
    """What every template needs to know about the request it answers."""

    at: Incoming
    read_only: bool
    csrf: str
    refresh_ms: int
    title: str
    label: str
    now_ms: int
    # The dashboard's redact hook, never raising (``PageHost.safe_redact``).
    redact: Redact

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        """A link under the mount point; empty query values are left out."""
        return self.at.url(path, query)

    def relative(self, ms: int) -> str:
        """``ms`` as an age (``3s ago``) or, in the future, a wait (``in 3s``)."""
        delta = self.now_ms - ms
        return f"{format_duration(delta)} ago" if delta >= 0 else f"in {format_duration(-delta)}"

    def message(self, task: Task) -> str:
        """The one line a listing shows for ``task`` (``message_of``), its error redacted."""
        if task.is_failed and task.error:
            return message_of(task, self.redact("error", task.error, task))
        return message_of(task)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def iso(ms: int | None) -> str:
    """UTC time with milliseconds, e.g. ``2026-01-02 03:04:05.678Z``."""
    if ms is None:
        return ""
    stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def short_id(task_id: str) -> str:
    return task_id if len(task_id) <= 16 else task_id[:9] + "…" + task_id[-6:]


def envelope(error: Any) -> dict[str, Any]:
    """An error as an envelope, whatever shape another writer (or a redact hook) left it in."""
    if error is None:
        return {}
    if isinstance(error, dict):
        return error
    return {"type": "Error", "code": "", "message": str(error)}


def message_of(task: Task, error: Any = None) -> str:
    """The one line a listing shows for a task: its error, cancel state or message.

    ``error`` is the task's error as it may be shown (redacted); the stored one if
    not given.
    """
    if task.is_failed and task.error:
        shown = envelope(task.error if error is None else error)
        return f"{shown.get('type', 'Error')}: {shown.get('message', '')}"
    if task.cancel_requested and task.is_running:
        return "cancel requested" + (f" · {task.message}" if task.message else "")
    return task.message or ""


def to_json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class ErrorView:
    """An error envelope laid out for the page: multi-line texts (tracebacks) apart."""

    type: str
    code: str
    message: str
    # (key, text) of each details entry that is text over several lines, such as the
    # ``traceback`` cairnq workers store or the ``stack`` of other SDKs: shown as text.
    texts: list[tuple[str, str]]
    # The other details, shown as JSON; None when there are none.
    rest: Any


def error_view(error: Any) -> ErrorView:
    """``error`` (an envelope, as shown after redaction) for the error box."""
    env = envelope(error)
    details = env.get("details")
    texts: list[tuple[str, str]] = []
    rest: Any = details
    if isinstance(details, dict):
        texts = [
            (str(k), v)
            for k, v in details.items()
            if isinstance(v, str) and ("\n" in v or k in ("traceback", "stack"))
        ]
        shown = {k for k, _ in texts}
        rest = {k: v for k, v in details.items() if str(k) not in shown} or None
    elif isinstance(details, str) and details:
        texts, rest = [("details", details)], None
    elif not details:
        rest = None
    return ErrorView(
        type=str(env.get("type", "") or ""),
        code=str(env.get("code", "") or ""),
        message=str(env.get("message", "") or ""),
        texts=texts,
        rest=rest,
    )


@dataclass(frozen=True)
class Attempts:
    """How many runs a task had and may have, as the protocol counts them.

    ``attempt`` counts claims. Runs up to ``max_attempts`` come by themselves (a
    retryable failure with attempts left is queued again); a ``retry`` without
    ``reset_attempt`` of a task at its last attempt grants exactly one run more, so
    ``attempt`` can pass ``max_attempts``: those runs are ``by_retry``.
    """

    attempt: int
    max_attempts: int
    # The runs this task is allowed: max_attempts, plus those granted by manual retry.
    allowed: int
    by_retry: int

    @property
    def short(self) -> str:
        """For a listing: ``1/3``, or ``2/1+1`` when a manual retry granted a run."""
        extra = f"+{self.by_retry}" if self.by_retry else ""
        return f"{self.attempt}/{self.max_attempts}{extra}"

    @property
    def long(self) -> str:
        """For the task page: ``1 of 3``, or ``2 of 2 allowed (max_attempts 1 + 1 by manual
        retry)``."""
        if not self.by_retry:
            return f"{self.attempt} of {self.max_attempts}"
        runs = "run" if self.by_retry == 1 else "runs"
        return (
            f"{self.attempt} of {self.allowed} allowed (max_attempts {self.max_attempts} "
            f"+ {self.by_retry} {runs} by manual retry)"
        )

    @property
    def title(self) -> str:
        """A tooltip saying what the numbers mean."""
        text = f"attempt {self.attempt}; max_attempts {self.max_attempts}"
        if self.by_retry:
            text += f"; {self.by_retry} more allowed by manual retry"
        return text


def attempts(task: Task) -> Attempts:
    """``task``'s attempts: a queued task's count includes the run it waits for."""
    # The run a queued task waits for is attempt + 1: past max_attempts only when a
    # manual retry granted it (a retryable failure requeues only below max_attempts).
    runs = task.attempt + 1 if task.is_queued else task.attempt
    allowed = max(task.max_attempts, runs)
    return Attempts(task.attempt, task.max_attempts, allowed, allowed - task.max_attempts)


@dataclass(frozen=True)
class ErrorState:
    """What the error box says of the stored error: will the protocol run the task again?"""

    pill: str
    kind: str
    note: str


def error_state(task: Task, view: View) -> ErrorState:
    """Whether the task's stored error ends it, and why, for the error box's pill.

    The error is kept on every path but ``retry``: a queued task carrying one failed
    retryably and waits for its next run (the protocol runs it again by itself); a
    running or succeeded one carries an earlier attempt's; a failed one is final
    whatever the envelope's ``retryable`` says, as nothing requeues a failed task
    but a manual retry.
    """
    counts = attempts(task)
    if task.is_queued:
        when = view.relative(task.run_at_ms)
        return ErrorState("retrying", "retry", f"attempt {task.attempt + 1} runs {when}")
    if task.is_running:
        return ErrorState(
            "earlier attempt",
            "",
            f"from attempt {task.attempt - 1}; attempt {task.attempt} runs now",
        )
    if task.is_succeeded:
        return ErrorState("earlier attempt", "", "from an earlier attempt; a later one succeeded")
    if task.is_canceled:
        return ErrorState("canceled", "off", "the task was canceled; retry runs it again")
    retryable = envelope(task.error).get("retryable") is True
    if retryable and task.attempt >= counts.allowed:
        note = f"a retryable error, but no attempt left ({counts.long}): retry runs it again"
    elif retryable:
        note = "the task ended here: retry runs it again"
    else:
        note = "a non-retryable error: retry runs it again"
    return ErrorState("final", "bad", note)


def _escape(value: Any) -> Any:
    """Every printed value, escaped as ``html.escape`` does (``&quot;``, ``&#x27;``)."""
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


TEMPLATES = Environment(
    loader=ChoiceLoader(
        [
            PackageLoader("cairnq.dashboard", "templates"),
            *(PackageLoader(package, "templates") for package in EXTENSION_TEMPLATES),
        ]
    ),
    autoescape=True,
    finalize=_escape,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
TEMPLATES.globals.update(
    attempts=attempts,
    format_duration=format_duration,
    iso=iso,
    zoned=format_instant,
    short_id=short_id,
    to_json=to_json,
)


def render(name: str, view: View | None = None, **values: Any) -> str:
    """The template ``name`` filled in with ``values`` (and ``view``, for pages)."""
    if view is not None:
        values["view"] = view
    return TEMPLATES.get_template(name).render(**values)


def bare_page(title: str, message: str) -> str:
    """A page for requests refused before any view exists (no token): no links, no data."""
    return render("bare.html", title=title, message=message)
