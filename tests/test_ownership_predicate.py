"""The ownership fence is written once: every owned write carries the protocol's own
predicate (id, running, worker id, attempt, live lease), word for word, and nothing
else fences it (no second table, no join, no lock on another row).

A cairnq worker's claim writes its worker id with a nonce fresh for the claim into
``worker_id``, so the predicate alone tells that claim from every other. Changing
the predicate is one edit here and the same edit in each statement listed; a
statement that takes an attempt and a worker id and is not listed fails the test.
"""

from __future__ import annotations

import re

import pytest

from cairnq.protocol.statements import DIALECTS, Dialect, statements

# The protocol's ownership predicate, as each dialect writes it in a single-row write.
PREDICATE: dict[Dialect, str] = {
    "sqlite": (
        "id = :id and status = 'running' and worker_id = :worker_id"
        " and attempt = :attempt and lease_until_ms > :now_ms"
    ),
    "postgres": (
        "id = :id::text and status = 'running' and worker_id = :worker_id::text"
        " and attempt = :attempt::integer and lease_until_ms > (select now_ms from clock)"
    ),
}
# The same predicate for a batch: row ``p`` of the arrays (ids, attempts, worker_ids)
# against the task row ``t`` (SQLite's unary + keeps the status index out).
BATCH_PREDICATE: dict[Dialect, str] = {
    "sqlite": (
        "+cairnq_tasks.status = 'running' and cairnq_tasks.worker_id = p.worker_id"
        " and cairnq_tasks.attempt = p.attempt and cairnq_tasks.lease_until_ms > :now_ms"
    ),
    "postgres": (
        "t.status = 'running' and t.worker_id = p.worker_id"
        " and t.attempt = p.attempt and t.lease_until_ms > (select now_ms from clock)"
    ),
}
OWNED = {
    "complete",
    "succeed",
    "fail",
    "progress",
    "heartbeat",
    "hand_back",
    "steps_record",
    "waits_write",
}
# With the attempt history's settling statements, which settle as complete and fail do.
OWNED_POSTGRES = {"hold", "history_complete", "history_fail"}
BATCHES = {"heartbeat_batch", "complete_many"}
BATCHES_POSTGRES = {"history_complete_many"}
# Settles what this transaction holds already (``hold`` ran, under the full predicate):
# the predicate without the live lease.
HELD = {"complete_held"}
# Statements that take a worker id and an attempt and are no owned write.
NOT_OWNED: set[str] = set()


def _code(text: str) -> str:
    """Statement text without comments, whitespace collapsed."""
    return " ".join(re.sub(r"--[^\n]*", "", text).split())


def _owned(dialect: Dialect) -> set[str]:
    return OWNED | (OWNED_POSTGRES if dialect == "postgres" else set())


def _batches(dialect: Dialect) -> set[str]:
    return BATCHES | (BATCHES_POSTGRES if dialect == "postgres" else set())


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_single_row_owned_write_carries_the_protocol_predicate(dialect: Dialect) -> None:
    found = statements(dialect)
    missing = [
        n for n in sorted(_owned(dialect)) if PREDICATE[dialect] not in _code(found[n].source)
    ]
    assert missing == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_batch_owned_write_carries_the_protocol_predicate_per_row(dialect: Dialect) -> None:
    found = statements(dialect)
    batches = _batches(dialect)
    missing = [n for n in sorted(batches) if BATCH_PREDICATE[dialect] not in _code(found[n].source)]
    assert missing == []
    assert all(":worker_ids" in found[n].source for n in batches)


def test_a_held_settlement_carries_the_predicate_but_the_live_lease() -> None:
    held = PREDICATE["postgres"].split(" and lease_until_ms")[0]
    found = statements("postgres")
    assert all(held in _code(found[n].source) for n in HELD)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_statement_taking_a_worker_and_an_attempt_is_a_listed_owned_write(
    dialect: Dialect,
) -> None:
    listed = _owned(dialect) | _batches(dialect) | HELD | NOT_OWNED
    takers = {
        name
        for name, statement in statements(dialect).items()
        if {"attempt", "worker_id"} <= statement.params
        or {"attempts", "worker_ids"} <= statement.params
    }
    assert takers - listed == set()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_statement_fences_on_a_second_table(dialect: Dialect) -> None:
    uses = [n for n, s in statements(dialect).items() if "cairnq_leases" in _code(s.source)]
    assert uses == []
