"""Server-rendered pages of the dashboard.

Every value that comes from the database or the request passes through ``esc``
before it reaches the page: task names, queues, messages and JSON values are
attacker-controlled text. Markup is built only from literals here and escaped
values; nothing is marked safe from outside this module.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from ..durations import format_duration
from ..models import STATUSES, QueueActivity, QueueSummary, Task, TaskPage, WorkerInfo
from ._charts import activity_chart, sparkline

Redact = Callable[[str, Any, Task], Any]

TASK_FILTERS = ("status", "queue", "name", "key", "correlation_id", "id_prefix", "root_id")
FILTER_LABELS = {
    "status": "Status",
    "queue": "Queue",
    "name": "Name",
    "key": "Key",
    "correlation_id": "Correlation id",
    "id_prefix": "Id prefix",
    "root_id": "Root",
}
NOTICES = {
    "canceled": "Task canceled.",
    "cancel_requested": "Cancel requested: the handler stops at its next check.",
    "retried": "Task queued again.",
    "not_cancelable": "Nothing to cancel: the task had already finished.",
    "not_retryable": "Only failed or canceled tasks can be retried.",
}


def part(name: str, markup: str) -> str:
    """A region the script swaps for the same-named region of a fresh render."""
    return f'<div data-live-part="{esc(name)}">{markup}</div>'


FINAL_MARK = '<div data-live-part="final" data-final hidden></div>'


def esc(value: Any) -> str:
    """Text made safe for HTML element content and quoted attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


@dataclass(frozen=True)
class View:
    """What every page needs to know about the request it answers."""

    root: str
    read_only: bool
    csrf: str
    refresh_ms: int
    title: str
    label: str
    now_ms: int
    redact: Redact

    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        """A link under the mount point; empty query values are left out."""
        pairs = [(k, str(v)) for k, v in (query or {}).items() if v not in (None, "")]
        suffix = "?" + urlencode(pairs) if pairs else ""
        return f"{self.root}{path}{suffix}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# --- small pieces ----------------------------------------------------------------------------


def iso(ms: int | None) -> str:
    if ms is None:
        return ""
    stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def ago(view: View, ms: int | None) -> str:
    """``<time>`` with a relative age, the absolute UTC time on hover."""
    if ms is None:
        return '<span class="muted">-</span>'
    delta = view.now_ms - ms
    text = f"{format_duration(delta)} ago" if delta >= 0 else f"in {format_duration(-delta)}"
    return f'<time datetime="{esc(iso(ms))}" title="{esc(iso(ms))}">{esc(text)}</time>'


def badge(status: str) -> str:
    return f'<span class="badge s-{esc(status)}">{esc(status)}</span>'


def progress(task: Task) -> str:
    """A native progress bar (no inline style, so the CSP can forbid inline styles)."""
    if task.progress is None:
        if task.is_running:
            return '<progress class="bar" aria-label="progress"></progress>'
        return '<span class="muted">-</span>'
    value = min(1.0, max(0.0, task.progress))
    percent = f"{value * 100:.0f}%"
    return (
        f'<span class="prog"><progress class="bar" max="1" value="{value:.4f}" '
        f'aria-label="progress">{percent}</progress>'
        f'<span class="pct">{percent}</span></span>'
    )


def short_id(task_id: str) -> str:
    return task_id if len(task_id) <= 16 else task_id[:9] + "…" + task_id[-6:]


def task_link(view: View, task_id: str | None, text: str | None = None) -> str:
    if not task_id:
        return '<span class="muted">-</span>'
    label = text if text is not None else short_id(task_id)
    href = view.url("/task", {"id": task_id})
    return f'<a class="mono" href="{esc(href)}" title="{esc(task_id)}">{esc(label)}</a>'


def envelope(task: Task) -> dict[str, Any]:
    """The task's error as an envelope, whatever shape another writer stored."""
    error: Any = task.error
    if error is None:
        return {}
    if isinstance(error, dict):
        return error
    return {"type": "Error", "code": "", "message": str(error)}


def message_of(task: Task) -> str:
    if task.is_failed and task.error:
        error = envelope(task)
        return f"{error.get('type', 'Error')}: {error.get('message', '')}"
    if task.cancel_requested and task.is_running:
        return "cancel requested" + (f" · {task.message}" if task.message else "")
    return task.message or ""


def json_block(value: Any) -> str:
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        text = repr(value)
    return f'<pre class="json">{esc(text)}</pre>'


def notice(text: str, kind: str = "info") -> str:
    return f'<div class="notice n-{esc(kind)}" role="status">{esc(text)}</div>'


def csrf_field(view: View) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(view.csrf)}">'


# --- the frame -------------------------------------------------------------------------------


def page(
    view: View,
    *,
    title: str,
    active: str,
    body: str,
    live: bool = False,
    final: bool = False,
) -> str:
    """A whole page. With ``live``, the script refreshes the body's ``part``s in place,
    until ``final`` (nothing shown will change by itself)."""
    nav = "".join(
        f'<a href="{esc(view.url(path))}"{" aria-current=page" if key == active else ""}>'
        f"{esc(label)}</a>"
        for key, path, label in (
            ("overview", "/", "Overview"),
            ("tasks", "/tasks", "Tasks"),
            ("workers", "/workers", "Workers"),
        )
    )
    mode = (
        '<span class="pill ro" title="actions are disabled">read-only</span>'
        if view.read_only
        else ""
    )
    refresh = ""
    if live:
        refresh = f' data-refresh="{view.refresh_ms}"' + (" data-final" if final else "")
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="same-origin">'
        f"<title>{esc(title)} · {esc(view.title)}</title>"
        f'<link rel="stylesheet" href="{esc(view.url("/static/dashboard.css"))}">'
        f'<script defer src="{esc(view.url("/static/dashboard.js"))}"></script>'
        "</head><body>"
        '<header class="top"><div class="wrap">'
        f'<a class="brand" href="{esc(view.url("/"))}">{esc(view.title)}</a>'
        f'<nav aria-label="main">{nav}</nav>'
        f'<div class="meta"><span class="db" title="database">{esc(view.label)}</span>{mode}'
        '<button type="button" id="live-toggle" class="live-toggle" aria-pressed="true" '
        'title="pause or resume live updates"><span class="dot"></span>live</button>'
        "</div></div></header>"
        f'<main class="wrap"{refresh}>{body}</main>'
        "</body></html>\n"
    )


# --- overview --------------------------------------------------------------------------------


def overview_live(
    view: View,
    summaries: Sequence[QueueSummary],
    activity: Sequence[QueueActivity],
    workers: int,
) -> str:
    by_queue = {a.queue: a for a in activity}
    queued = sum(s.counts.get("queued", 0) for s in summaries)
    running = sum(s.counts.get("running", 0) for s in summaries)
    finished = sum(a.finished for a in activity)
    failed = sum(sum(a.failed) for a in activity)
    ended = sum(sum(a.succeeded) + sum(a.failed) for a in activity)
    rate = "-" if ended == 0 else f"{failed * 100 / ended:.1f}%"
    tiles = "".join(
        f'<div class="tile"><div class="k">{esc(k)}</div><div class="v">{v}</div></div>'
        for k, v in (
            ("queued", esc(queued)),
            ("running", esc(running)),
            ("finished, last hour", esc(finished)),
            ("failure rate, last hour", esc(rate)),
            ("workers", f'<a href="{esc(view.url("/workers"))}">{esc(workers)}</a>'),
        )
    )
    chart = activity_chart(activity)
    rows = []
    for summary in summaries:
        series = by_queue.get(summary.queue)
        q = summary.queue
        cells = "".join(
            f'<td class="num">{_count_link(view, q, status, summary.counts.get(status, 0))}</td>'
            for status in STATUSES
        )
        done = series.finished if series else 0
        failure = series.failure_rate if series else None
        late = summary.oldest_queued_age_ms
        rows.append(
            "<tr>"
            f'<th scope="row"><a href="{esc(view.url("/tasks", {"queue": q}))}">{esc(q)}</a></th>'
            f"{cells}"
            f'<td class="num">{"-" if late is None else esc(format_duration(late))}</td>'
            f'<td class="spark">{sparkline(series) if series else ""}</td>'
            f'<td class="num">{esc(done)}</td>'
            f'<td class="num">{"-" if failure is None else esc(f"{failure * 100:.1f}%")}</td>'
            "</tr>"
        )
    heads = "".join(f'<th class="num">{esc(s)}</th>' for s in STATUSES)
    table = (
        '<table class="grid queues"><thead><tr><th>queue</th>'
        f"{heads}"
        '<th class="num" title="how long the oldest due queued task has waited">oldest due</th>'
        "<th>last hour</th>"
        '<th class="num">done/h</th><th class="num" title="failed / (succeeded + failed)">'
        "fail %</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        if summaries
        else '<p class="empty">No tasks yet. Submit one and it shows up here.</p>'
    )
    return (
        f'<section class="tiles">{tiles}</section>'
        '<section class="card"><div class="card-h"><h2>Finished per 2 minutes, last hour</h2>'
        '<div class="legend"><span class="lg ok"></span>succeeded'
        '<span class="lg bad"></span>failed<span class="lg off"></span>canceled</div></div>'
        f"{chart}</section>"
        f'<section class="card"><div class="card-h"><h2>Queues</h2></div>{table}</section>'
    )


def _count_link(view: View, queue: str, status: str, count: int) -> str:
    if count == 0:
        return '<span class="zero">0</span>'
    href = view.url("/tasks", {"queue": queue, "status": status})
    return f'<a class="c-{esc(status)}" href="{esc(href)}">{esc(count)}</a>'


# --- tasks -----------------------------------------------------------------------------------


def filters_form(view: View, filters: Mapping[str, str]) -> str:
    options = '<option value="">any status</option>' + "".join(
        f'<option value="{esc(s)}"{" selected" if filters.get("status") == s else ""}>'
        f"{esc(s)}</option>"
        for s in STATUSES
    )
    fields = [f'<label>Status<select name="status">{options}</select></label>']
    for name in ("queue", "name", "key", "correlation_id", "id_prefix"):
        fields.append(
            f"<label>{esc(FILTER_LABELS[name])}"
            f'<input name="{esc(name)}" value="{esc(filters.get(name, ""))}" '
            'autocomplete="off" spellcheck="false"></label>'
        )
    if filters.get("root_id"):
        fields.append(f'<input type="hidden" name="root_id" value="{esc(filters["root_id"])}">')
    purge = ""
    if not view.read_only:
        query = {k: filters.get(k) for k in ("status", "queue", "name")}
        purge = f'<a class="btn ghost danger" href="{esc(view.url("/purge", query))}">Purge…</a>'
    return (
        f'<form class="filters" method="get" action="{esc(view.url("/tasks"))}" role="search">'
        f"{''.join(fields)}"
        '<div class="actions"><button class="btn" type="submit">Filter</button>'
        f'<a class="btn ghost" href="{esc(view.url("/tasks"))}">Clear</a>{purge}</div></form>'
    )


def tasks_live(view: View, page_: TaskPage, filters: Mapping[str, str], cursor: str | None) -> str:
    rows = "".join(_task_row(view, t) for t in page_.tasks)
    if not page_.tasks:
        body = '<p class="empty">No task matches.</p>'
    else:
        body = (
            '<table class="grid tasks"><thead><tr><th>id</th><th>name</th><th>queue</th>'
            '<th>status</th><th class="num">attempt</th><th class="num">age</th>'
            "<th>progress</th><th>message</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
    pager = []
    if cursor:
        pager.append(f'<a class="btn ghost" href="{esc(view.url("/tasks", filters))}">« Newest</a>')
    if page_.next_cursor:
        query = dict(filters) | {"cursor": page_.next_cursor}
        pager.append(
            f'<a class="btn ghost" rel="next" href="{esc(view.url("/tasks", query))}">Older »</a>'
        )
    nav = f'<nav class="pager" aria-label="pages">{"".join(pager)}</nav>' if pager else ""
    return f'<section class="card flush">{body}</section>{nav}'


def _task_row(view: View, task: Task) -> str:
    return (
        f'<tr data-task="{esc(task.id)}" class="st-{esc(task.status)}">'
        f"<td>{task_link(view, task.id)}</td>"
        f'<td class="name">{esc(task.name)}</td>'
        f'<td><a href="{esc(view.url("/tasks", {"queue": task.queue}))}">{esc(task.queue)}</a></td>'
        f"<td>{badge(task.status)}</td>"
        f'<td class="num">{esc(task.attempt)}/{esc(task.max_attempts)}</td>'
        f'<td class="num">{ago(view, task.created_at_ms)}</td>'
        f"<td>{progress(task)}</td>"
        f'<td class="msg" title="{esc(message_of(task))}">{esc(message_of(task))}</td>'
        "</tr>"
    )


# --- one task --------------------------------------------------------------------------------


def task_head(view: View, task: Task) -> str:
    actions = ""
    if not view.read_only:
        buttons = []
        if task.status in ("queued", "running") and not task.cancel_requested:
            href = view.url("/task/cancel", {"id": task.id})
            buttons.append(f'<a class="btn danger" href="{esc(href)}">Cancel…</a>')
        if task.status in ("failed", "canceled"):
            href = view.url("/task/retry", {"id": task.id})
            buttons.append(f'<a class="btn" href="{esc(href)}">Retry…</a>')
        actions = f'<div class="actions">{"".join(buttons)}</div>'
    return (
        '<div class="task-h"><div>'
        f'<div class="crumbs"><a href="{esc(view.url("/tasks"))}">Tasks</a> / '
        f'<a href="{esc(view.url("/tasks", {"queue": task.queue}))}">{esc(task.queue)}</a></div>'
        f"<h1>{esc(task.name)} {badge(task.status)}</h1></div>{actions}</div>"
    )


def _id_line(task: Task, key: str | None) -> str:
    """The id and the key: they never change, so they stay out of the refreshed parts
    (and the key, a scan of the key table, is read once per page view)."""
    shown = (
        f'<span class="k">key</span> <span class="mono sel">{esc(key)}</span>'
        if key
        else '<span class="k">no key</span>'
    )
    return f'<div class="idline"><span class="mono sel">{esc(task.id)}</span>{shown}</div>'


def task_parts(view: View, task: Task, children: Sequence[Task]) -> str:
    """The parts of a task's page that change while it runs, for a refresh."""
    parts = part("head", task_head(view, task)) + task_live(view, task, children)
    return parts + (FINAL_MARK if task.is_terminal else "")


def task_page_body(view: View, task: Task, key: str | None, children: Sequence[Task]) -> str:
    """The whole body: the live parts in two columns, payload and metadata under the right."""
    left, right = _task_columns(view, task, children)
    return (
        part("head", task_head(view, task))
        + _id_line(task, key)
        + '<div class="cols"><div class="col">'
        + part("left", left)
        + '</div><div class="col">'
        + part("right", right)
        + task_static(view, task)
        + "</div></div>"
    )


def task_live(view: View, task: Task, children: Sequence[Task]) -> str:
    left, right = _task_columns(view, task, children)
    return part("left", left) + part("right", right)


def _task_columns(view: View, task: Task, children: Sequence[Task]) -> tuple[str, str]:
    facts = [
        (
            "queue",
            f'<a href="{esc(view.url("/tasks", {"queue": task.queue}))}">{esc(task.queue)}</a>',
        ),
        ("attempt", f"{esc(task.attempt)} of {esc(task.max_attempts)}"),
        ("priority", esc(task.priority)),
        ("worker", _worker_cell(view, task)),
        ("correlation id", _correlation(view, task.correlation_id)),
    ]
    if task.is_running:
        facts.append(("lease until", ago(view, task.lease_until_ms)))
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in facts)
    bar = (
        '<div class="progress-big">'
        f"{progress(task)}"
        f'<div class="pmsg">{esc(task.message or "")}</div></div>'
    )
    lineage = _lineage(view, task, children)
    error = ""
    if task.error:
        env = envelope(task)
        error = (
            '<section class="card errbox"><div class="card-h"><h2>Error</h2>'
            f'<span class="mono">{esc(env.get("type", ""))} [{esc(env.get("code", ""))}]</span>'
            f"{' <span class=pill>retryable</span>' if env.get('retryable') else ''}</div>"
            f'<p class="errmsg">{esc(env.get("message", ""))}</p>'
            f"{json_block(env.get('details')) if env.get('details') else ''}</section>"
        )
    result = ""
    if task.is_succeeded or task.result is not None:
        result = (
            '<section class="card"><div class="card-h"><h2>Result</h2></div>'
            f"{json_block(view.redact('result', task.result, task))}</section>"
        )
    # Progress only says something while a task runs, or once it reported some.
    show_bar = task.is_running or task.progress is not None or bool(task.message)
    progress_card = (
        f'<section class="card"><div class="card-h"><h2>Progress</h2></div>{bar}</section>'
        if show_bar
        else ""
    )
    left = (
        f"{progress_card}"
        '<section class="card"><div class="card-h"><h2>Details</h2></div>'
        f'<dl class="facts">{dl}</dl></section>'
        '<section class="card"><div class="card-h"><h2>Timeline</h2></div>'
        f"{_timeline(view, task)}</section>"
        f"{lineage}"
    )
    right = f"{error}{result}"
    return left, right


def task_static(view: View, task: Task) -> str:
    """Payload and metadata: they never change, so they stay out of the refreshed region."""
    return (
        '<section class="card"><div class="card-h"><h2>Payload</h2></div>'
        f"{json_block(view.redact('payload', task.payload, task))}</section>"
        '<section class="card"><div class="card-h"><h2>Metadata</h2></div>'
        f"{json_block(view.redact('metadata', task.metadata, task))}</section>"
    )


def _worker_cell(view: View, task: Task) -> str:
    if not task.worker_id:
        return '<span class="muted">-</span>'
    return f'<span class="mono">{esc(task.worker_id)}</span>'


def _correlation(view: View, value: str | None) -> str:
    if not value:
        return '<span class="muted">-</span>'
    href = view.url("/tasks", {"correlation_id": value})
    return f'<a href="{esc(href)}">{esc(value)}</a>'


def _timeline(view: View, task: Task) -> str:
    events: list[tuple[int, str, str]] = [(task.created_at_ms, "created", "")]
    if task.run_at_ms > task.created_at_ms:
        due = "due" if task.run_at_ms <= view.now_ms else "runs"
        events.append((task.run_at_ms, due, "delayed" if task.attempt == 0 else "retry backoff"))
    if task.cancel_requested_at_ms is not None:
        events.append((task.cancel_requested_at_ms, "cancel requested", ""))
    if task.completed_at_ms is not None:
        events.append((task.completed_at_ms, task.status, ""))
    elif task.updated_at_ms > task.created_at_ms:
        events.append((task.updated_at_ms, "last update", task.status))
    events.sort(key=lambda e: e[0])
    items = "".join(
        f'<li class="ev ev-{esc(label.replace(" ", "-"))}"><span class="when">{esc(iso(at))}</span>'
        f'<span class="what">{esc(label)}</span>'
        f'<span class="rel">{ago(view, at)}{" · " + esc(note) if note else ""}</span></li>'
        for at, label, note in events
    )
    total = ""
    if task.completed_at_ms is not None:
        took = format_duration(task.completed_at_ms - task.created_at_ms)
        total = f'<p class="muted small">took {esc(took)} from submit to finish</p>'
    return f'<ol class="timeline">{items}</ol>{total}'


def _lineage(view: View, task: Task, children: Sequence[Task]) -> str:
    root_is_self = not task.root_id or task.root_id == task.id
    if task.parent_id is None and root_is_self and not children:
        return ""
    rows = []
    if not root_is_self:
        tree = view.url("/tasks", {"root_id": task.root_id})
        rows.append(
            f"<dt>root</dt><dd>{task_link(view, task.root_id)} "
            f'<a class="small" href="{esc(tree)}">whole tree</a></dd>'
        )
    if task.parent_id:
        rows.append(f"<dt>parent</dt><dd>{task_link(view, task.parent_id)}</dd>")
    kids = "".join(
        f"<li>{task_link(view, c.id)} <span class=name>{esc(c.name)}</span> {badge(c.status)}</li>"
        for c in children
    )
    if children:
        rows.append(f'<dt>children</dt><dd><ul class="kids">{kids}</ul></dd>')
    return (
        '<section class="card"><div class="card-h"><h2>Lineage</h2></div>'
        f'<dl class="facts">{"".join(rows)}</dl></section>'
    )


# --- confirmations ---------------------------------------------------------------------------


def confirm_task(view: View, task: Task, action: str) -> str:
    back = view.url("/task", {"id": task.id})
    target = view.url(f"/task/{action}", {"id": task.id})
    if action == "cancel":
        what = (
            "The task is queued: it will never run."
            if task.is_queued
            else "The task is running: its handler is asked to stop and the task ends canceled."
        )
        extra = ""
        button = '<button class="btn danger" type="submit">Cancel task</button>'
    else:
        what = "The task goes back to the queue and runs again."
        extra = (
            '<label class="check"><input type="checkbox" name="reset_attempt" value="1"> '
            "reset the attempt counter (allows max_attempts more runs)</label>"
        )
        button = '<button class="btn" type="submit">Retry task</button>'
    return (
        '<section class="card confirm">'
        f"<h1>{esc(action.capitalize())} this task?</h1>"
        f"<p><strong>{esc(task.name)}</strong> {badge(task.status)} "
        f'<span class="mono muted">{esc(task.id)}</span></p>'
        f"<p>{esc(what)}</p>"
        f'<form method="post" action="{esc(target)}">{csrf_field(view)}{extra}'
        f'<div class="actions">{button}<a class="btn ghost" href="{esc(back)}">Back</a></div>'
        "</form></section>"
    )


def confirm_purge(view: View, filters: Mapping[str, str], error: str | None = None) -> str:
    status = filters.get("status", "")
    options = '<option value="">any finished status</option>' + "".join(
        f'<option value="{s}"{" selected" if status == s else ""}>{s}</option>'
        for s in ("succeeded", "failed", "canceled")
    )
    older = filters.get("older_than", "") or "0s"
    warn = notice(error, "error") if error else ""
    return (
        '<section class="card confirm">'
        "<h1>Purge finished tasks</h1>"
        "<p>Deletes every finished (succeeded, failed or canceled) task that matches, "
        "with its key. Queued and running tasks are never touched. This cannot be undone.</p>"
        f"{warn}"
        f'<form method="post" action="{esc(view.url("/purge"))}" class="filters">{csrf_field(view)}'
        f'<label>Status<select name="status">{options}</select></label>'
        f'<label>Queue<input name="queue" value="{esc(filters.get("queue", ""))}" '
        'placeholder="any"></label>'
        f'<label>Name<input name="name" value="{esc(filters.get("name", ""))}" '
        'placeholder="any"></label>'
        f'<label>Finished longer ago than<input name="older_than" value="{esc(older)}" '
        'title="a duration: 7d, 12h, 30m, 45s; 0s for any age"></label>'
        '<div class="actions">'
        '<button class="btn danger" type="submit">Purge matching tasks</button>'
        f'<a class="btn ghost" href="{esc(view.url("/tasks"))}">Back</a></div></form></section>'
    )


# --- workers ---------------------------------------------------------------------------------


def workers_live(view: View, workers: Sequence[WorkerInfo], window_ms: int) -> str:
    if not workers:
        return (
            '<section class="card"><p class="empty">No worker seen in the last '
            f"{esc(format_duration(window_ms))} and no task is running.</p></section>"
        )
    cards = "".join(_worker_card(view, w) for w in workers)
    return f'<section class="workers">{cards}</section>'


def _worker_card(view: View, worker: WorkerInfo) -> str:
    if worker.last_seen_ms is None:
        origin = '<span class="pill">from running tasks</span>'
        facts = ""
    else:
        origin = ""
        queues = ", ".join(worker.queues or ())
        facts_list = [
            ("queues", esc(queues) or "-"),
            ("host", esc(worker.host or "-") + (f" · pid {esc(worker.pid)}" if worker.pid else "")),
            ("concurrency", esc(worker.concurrency if worker.concurrency is not None else "-")),
            ("started", ago(view, worker.started_at_ms)),
            ("last seen", ago(view, worker.last_seen_ms)),
        ]
        facts = (
            '<ul class="kv">'
            + "".join(f'<li><span class="k">{esc(k)}</span> {v}</li>' for k, v in facts_list)
            + "</ul>"
        )
    if worker.running:
        rows = "".join(
            "<tr>"
            f"<td>{task_link(view, t.id)}</td><td class=name>{esc(t.name)}</td>"
            f"<td>{esc(t.queue)}</td><td>{progress(t)}</td>"
            f'<td class="msg">{esc(message_of(t))}</td></tr>'
            for t in worker.running
        )
        running = (
            '<table class="grid inner"><thead><tr><th>task</th><th>name</th><th>queue</th>'
            f"<th>progress</th><th>message</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    else:
        running = '<p class="muted small">idle</p>'
    count = len(worker.running)
    return (
        f'<article class="card worker" data-worker="{esc(worker.worker_id)}">'
        f'<div class="card-h"><h2 class="mono">{esc(worker.worker_id)}</h2>{origin}'
        f'<span class="muted small">{esc(count)} running</span></div>'
        f"{facts}{running}</article>"
    )


# --- errors ----------------------------------------------------------------------------------


def error_page(view: View, title: str, message: str) -> str:
    body = (
        f'<section class="card confirm"><h1>{esc(title)}</h1><p>{esc(message)}</p>'
        f'<p><a href="{esc(view.url("/"))}">Back to the overview</a></p></section>'
    )
    return page(view, title=title, active="", body=body)


def bare_page(title: str, message: str) -> str:
    """A page for requests refused before any view exists (no token): no links, no data."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title></head><body>"
        f"<h1>{esc(title)}</h1><p>{esc(message)}</p></body></html>\n"
    )


def join(parts: Iterable[str]) -> str:
    return "".join(parts)
