"""Deciding what to claim: free capacity split into draws, one transaction per poll."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..kernel import Draw
from ._registry import Registration, Registry


def plan_claim(
    registry: Registry,
    *,
    free_calls: int,
    calls_by_name: Mapping[str, int],
    claim_batch: int | None,
    turn: int,
    row_budget: int | None = None,
) -> list[Draw]:
    """Split ``free_calls`` handler calls into claim draws.

    Names that are batched or have their own concurrency cap get a draw each;
    plain names holding a resource share one draw per resource (so a poll never
    spends a resource's headroom on one name that has nothing due while another
    does); all other names share one. A draw holding a resource asks for no more
    calls than its capacity minus its calls in flight (of every name holding it)
    and those drawn earlier in this plan. The order rotates with ``turn`` so no
    source is always served last when capacity is short. ``row_budget`` caps the
    tasks claimed in all (the byte budget, counted in tasks).
    """
    solo = [r for r in registry if r.batch > 1 or r.concurrency is not None]
    by_resource: dict[str, list[str]] = {}
    shared: list[str] = []
    for registration in registry:
        if registration.batch > 1 or registration.concurrency is not None:
            continue
        if registration.resource is not None:
            by_resource.setdefault(registration.resource, []).append(registration.name)
        else:
            shared.append(registration.name)
    headroom = dict(registry.resources)
    for registration in registry:
        if registration.resource is not None:
            headroom[registration.resource] -= calls_by_name.get(registration.name, 0)
    sources: list[Registration | tuple[str, list[str]] | list[str]] = [*solo]
    sources += [(resource, names) for resource, names in sorted(by_resource.items())]
    if shared:
        sources.append(shared)
    if not sources:
        return []
    shift = turn % len(sources)
    sources = sources[shift:] + sources[:shift]
    draws: list[Draw] = []
    for source in sources:
        if free_calls <= 0 or (row_budget is not None and row_budget <= 0):
            break
        resource: str | None = None
        batch = 1
        if isinstance(source, Registration):
            calls = free_calls
            if source.concurrency is not None:
                calls = min(calls, source.concurrency - calls_by_name.get(source.name, 0))
            resource, batch = source.resource, source.batch
            if resource is not None:
                calls = min(calls, headroom[resource])
            rows = calls * batch
            names = [source.name]
        elif isinstance(source, tuple):
            resource, names = source
            rows = min(free_calls, headroom[resource])
        else:
            rows = free_calls
            names = source
        if claim_batch is not None:
            rows = min(rows, claim_batch)
        if row_budget is not None:
            rows = min(rows, row_budget)
            row_budget -= max(rows, 0)
        if rows <= 0:
            continue
        draws.append(Draw(names, rows))
        free_calls -= -(-rows // batch)
        if resource is not None:
            headroom[resource] -= -(-rows // batch)
    return draws


def group_calls(
    rows: Sequence[Mapping[str, Any]], registry: Registry
) -> Iterator[tuple[Registration | None, list[Mapping[str, Any]]]]:
    """Group claimed rows into handler calls: one row per call, or chunks of ``batch``.

    Rows whose name has no handler come back with ``None``, one per call.
    """
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_name.setdefault(row["name"], []).append(row)
    for name, group in by_name.items():
        registration = registry.get(name)
        size = registration.batch if registration is not None else 1
        for start in range(0, len(group), size):
            yield registration, group[start : start + size]
