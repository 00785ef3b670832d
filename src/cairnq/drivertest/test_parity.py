"""Statement parity: the driver's dialect ships the protocol's statements and migrations.

A statement is canonical when every dialect runs it; a dialect may add statements
for what only it does (``DIALECT_EXTRAS``). Each canonical statement takes the
same parameters in every dialect, since the operations above the seam name them.
"""

from __future__ import annotations

import re

import pytest

from .. import kernel
from ..kernel.setup import expected_objects, present_objects
from ..protocol.statements import DIALECTS, Dialect, migrations, statements
from .driver import Driver

__all__ = [
    "test_the_dialect_ships_every_canonical_statement",
    "test_the_dialect_declares_the_statements_only_it_ships",
    "test_a_statement_takes_the_same_parameters_as_every_other_dialect",
    "test_every_statement_file_holds_one_statement",
    "test_statement_headers_say_what_returns_and_params",
    "test_every_migration_applies_to_a_fresh_database",
]

REFERENCE: Dialect = "sqlite"
"""The dialect the canonical statement list is read from."""

DIALECT_EXTRAS: dict[str, frozenset[str]] = {
    # The limits' pages that admit without claiming (no data-modifying CTEs).
    "sqlite": frozenset({"limits_admit_keyed", "limits_fair_admit"}),
    # The attempt history's settling statements that record in the same statement, and
    # the limits' pages that claim and record in the same statement.
    "postgres": frozenset(
        {
            *("installations", "hold", "complete_held"),
            *("history_complete", "history_complete_many", "history_fail"),
            *("limits_claim_keyed", "limits_fair_claim"),
        }
    ),
}
"""Statements only that dialect ships, for what only it does."""


def canonical_statements() -> list[str]:
    """The names every dialect must ship."""
    return sorted(set(statements(REFERENCE)) - DIALECT_EXTRAS[REFERENCE])


def test_the_dialect_ships_every_canonical_statement(driver: Driver) -> None:
    missing = sorted(set(canonical_statements()) - set(statements(driver.dialect)))
    assert missing == []


def test_the_dialect_declares_the_statements_only_it_ships(driver: Driver) -> None:
    extras = set(statements(driver.dialect)) - set(canonical_statements())
    assert extras == DIALECT_EXTRAS.get(driver.dialect, frozenset())


@pytest.mark.parametrize("name", canonical_statements())
def test_a_statement_takes_the_same_parameters_as_every_other_dialect(
    driver: Driver, name: str
) -> None:
    mine = statements(driver.dialect)[name].params
    for other in DIALECTS:
        if other != driver.dialect:
            assert mine == statements(other)[name].params, other


def check_one_statement_per_file(dialect: Dialect) -> None:
    """Every statement file of ``dialect`` holds one statement (no database needed)."""
    for statement in statements(dialect).values():
        body = statement.text.strip().rstrip(";")
        if re.match(r"(?i)create\s+trigger\b", body):
            # A trigger's body (begin ... end) is part of its one create statement.
            body = re.sub(r"(?is)\bbegin\b.*\bend$", "", body)
        assert ";" not in re.sub(r"'[^']*'", "", body), statement.name


def check_statement_headers(dialect: Dialect) -> None:
    """Every statement file of ``dialect`` starts with its three header lines."""
    for statement in statements(dialect).values():
        header = [ln for ln in statement.source.splitlines() if ln.startswith("--")][:3]
        assert len(header) == 3, statement.name
        assert header[2].startswith("-- params:"), statement.name


def test_every_statement_file_holds_one_statement(driver: Driver) -> None:
    check_one_statement_per_file(driver.dialect)


def test_statement_headers_say_what_returns_and_params(driver: Driver) -> None:
    check_statement_headers(driver.dialect)


def test_every_migration_applies_to_a_fresh_database(driver: Driver) -> None:
    names = {m.name for m in migrations(driver.dialect)}
    backend = driver.open()
    try:
        applied = backend.run(kernel.applied_migrations(), write=False)
        present = backend.run(present_objects(), write=False)
    finally:
        backend.close()
    assert applied == names
    assert set(expected_objects(driver.dialect, names)) <= present
