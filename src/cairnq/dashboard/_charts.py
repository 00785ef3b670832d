"""Inline SVG charts, rendered on the server: stacked bars of finished tasks per bucket.

Only numbers computed here reach the markup, plus escaped labels; colours come
from CSS classes, so the page needs no inline style.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from ..durations import format_duration
from ..models import QueueActivity

_SERIES = (("succeeded", "ok"), ("failed", "bad"), ("canceled", "off"))


def _totals(activity: Sequence[QueueActivity]) -> tuple[int, list[tuple[int, int, int]]]:
    """Bucket width and, per bucket, (succeeded, failed, canceled) summed over queues."""
    if not activity:
        return 0, []
    width = activity[0].bucket_ms
    size = len(activity[0].succeeded)
    sums = [(0, 0, 0)] * size
    for series in activity:
        sums = [
            (a + s, b + f, c + x)
            for (a, b, c), s, f, x in zip(
                sums, series.succeeded, series.failed, series.canceled, strict=True
            )
        ]
    return width, sums


def _nice(top: int) -> int:
    """A round axis maximum at or above ``top``."""
    if top <= 5:
        return max(1, top)
    magnitude = 10 ** (len(str(top)) - 1)
    for step in (1, 2, 2.5, 5, 10):
        if top <= step * magnitude:
            return int(step * magnitude)
    return top


def activity_chart(
    activity: Sequence[QueueActivity], *, width: int = 1240, height: int = 150
) -> str:
    """All queues together: one stacked bar per bucket, a y axis and time labels.

    The chart is drawn ``width`` units wide and scales to its container, so text
    keeps roughly its CSS size on a desktop screen.
    """
    width_ms, sums = _totals(activity)
    if not sums:
        return '<p class="empty small">Nothing finished in the last hour.</p>'
    left, right, top, bottom = 34, 6, 8, 20
    inner_w = width - left - right
    inner_h = height - top - bottom
    slot = inner_w / len(sums)
    bar_w = max(1.0, slot * 0.72)
    peak = _nice(max(sum(b) for b in sums))
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
        'aria-label="tasks finished per bucket" preserveAspectRatio="xMidYMid meet">'
    ]
    for fraction in (0.0, 0.5, 1.0):
        y = top + inner_h - fraction * inner_h
        value = round(peak * fraction)
        parts.append(
            f'<line class="grid-line" x1="{left}" x2="{left + inner_w}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{left - 6}" y="{y + 3:.1f}" text-anchor="end">{value}</text>'
        )
    for index, bucket in enumerate(sums):
        x = left + index * slot + (slot - bar_w) / 2
        base: float = top + inner_h
        label = " · ".join(f"{n} {name}" for (name, _), n in zip(_SERIES, bucket, strict=True) if n)
        when = format_duration((len(sums) - index) * width_ms)
        parts.append(
            f"<g><title>{html.escape(label or 'nothing')} ({html.escape(when)} ago)</title>"
        )
        for (_, css), count in zip(_SERIES, bucket, strict=True):
            if not count:
                continue
            h = count / peak * inner_h
            base -= h
            parts.append(
                f'<rect class="{css}" x="{x:.1f}" y="{base:.1f}" width="{bar_w:.1f}" '
                f'height="{h:.1f}" rx="2"/>'
            )
        parts.append("</g>")
    labels = ((0, f"-{format_duration(len(sums) * width_ms)}"), (len(sums), "now"))
    for index, text in labels:
        x = left + index * slot
        anchor = "start" if index == 0 else "end"
        parts.append(
            f'<text class="axis" x="{x:.1f}" y="{height - 4}" text-anchor="{anchor}">'
            f"{html.escape(text)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def sparkline(series: QueueActivity, *, width: int = 120, height: int = 22) -> str:
    """One queue's buckets as tiny stacked bars (failures on top, in red)."""
    buckets = list(zip(series.succeeded, series.failed, series.canceled, strict=True))
    if not buckets:
        return ""
    peak = max(1, max(sum(b) for b in buckets))
    step = width / len(buckets)
    parts = [
        f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{series.finished} finished in the window">'
    ]
    for index, bucket in enumerate(buckets):
        base = float(height)
        for (_, css), count in zip(_SERIES, bucket, strict=True):
            if not count:
                continue
            h = max(1.0, count / peak * (height - 2))
            base -= h
            parts.append(
                f'<rect class="{css}" x="{index * step + 0.5:.1f}" y="{base:.1f}" '
                f'width="{max(1.0, step - 1):.1f}" height="{h:.1f}"/>'
            )
    parts.append(
        f'<line class="base" x1="0" x2="{width}" y1="{height - 0.5}" y2="{height - 0.5}"/>'
    )
    parts.append("</svg>")
    return "".join(parts)
