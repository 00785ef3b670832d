"""The driver suite: the tests every cairnq backend must pass, behind one fixture.

A backend's test module defines a pytest fixture named ``driver`` that returns a
``Driver`` (one fresh, empty database of that backend per test) and imports the
suite's tests::

    import pytest
    from cairnq.drivertest import *  # noqa: F403

    @pytest.fixture
    def driver(tmp_path):
        ...  # a Driver on a fresh database; drop it after the test

The suite covers statement parity (``test_parity``), the task state machine
against a model (``test_state_machine``), the protocol's conformance scenarios
(``test_conformance``) and the transition log the chaos checker reads
(``test_transitions``). It needs the ``test`` extra (pytest, hypothesis). See
``docs/adding-a-backend.md``.

The modules holding tests, and the state machine's model
(``test_state_model``), are named ``test_*.py`` for Hypothesis too: it draws
constants from the source of every loaded module that is not test code, so
under any other name the state machine's sequences would change with the
suite's own source.
"""

from __future__ import annotations

from . import _rewrite  # noqa: F401 (first: the test modules below get rewritten asserts)
from .driver import TRANSITION_COLUMNS, Driver
from .test_conformance import test_scenario_passes
from .test_parity import (
    test_a_statement_takes_the_same_parameters_as_every_other_dialect,
    test_every_migration_applies_to_a_fresh_database,
    test_every_statement_file_holds_one_statement,
    test_statement_headers_say_what_returns_and_params,
    test_the_dialect_declares_the_statements_only_it_ships,
    test_the_dialect_ships_every_canonical_statement,
)
from .test_state_machine import test_random_operation_sequences_keep_database_and_model_in_step
from .test_transitions import (
    test_the_transition_log_has_every_column_the_checker_reads,
    test_the_transition_log_shows_a_task_failed_retried_canceled_and_purged,
    test_the_transition_log_shows_a_task_run_to_success,
)

__all__ = [
    "TRANSITION_COLUMNS",
    "Driver",
    # statement parity
    "test_the_dialect_ships_every_canonical_statement",
    "test_the_dialect_declares_the_statements_only_it_ships",
    "test_a_statement_takes_the_same_parameters_as_every_other_dialect",
    "test_every_statement_file_holds_one_statement",
    "test_statement_headers_say_what_returns_and_params",
    "test_every_migration_applies_to_a_fresh_database",
    # the state machine
    "test_random_operation_sequences_keep_database_and_model_in_step",
    # the conformance scenarios
    "test_scenario_passes",
    # the transition log
    "test_the_transition_log_has_every_column_the_checker_reads",
    "test_the_transition_log_shows_a_task_run_to_success",
    "test_the_transition_log_shows_a_task_failed_retried_canceled_and_purged",
]
