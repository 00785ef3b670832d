"""The Django tasks backend in a Django project, on SQLite and on PostgreSQL."""

from __future__ import annotations

import io
import secrets
from typing import Any

import pytest

from . import _django

_django.setup()

from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.management.base import CommandError  # noqa: E402
from django.test import Client  # noqa: E402

from cairnq.contrib.django import CairnQBackend  # noqa: E402
from cairnq.contrib.django._api import (  # noqa: E402
    TaskResultStatus,
    task_backends,
    task_finished,
    task_started,
)
from cairnq.errors import InvalidArgument, UnsupportedBackend  # noqa: E402

from .django_app import tasks  # noqa: E402
from .django_app.views import Refused  # noqa: E402


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def alias(request: pytest.FixtureRequest) -> str:
    """The database and task backend alias of one backend kind."""
    return _django.database_alias(request.param)


def stored_with(alias: str, marker: str) -> list[Any]:
    backend = task_backends[alias]
    assert isinstance(backend, CairnQBackend)
    found = backend.client().list(name=tasks.add.module_path, limit=1000)
    return [t for t in found if t.payload["kwargs"].get("marker") == marker]


def run_worker(alias: str) -> str:
    out = io.StringIO()
    call_command(
        "cairnq_worker", "--backend", alias, "--until-idle", "--poll-interval-ms", "20", stdout=out
    )
    return out.getvalue()


def test_a_view_that_enqueues_in_a_transaction_and_raises_enqueues_nothing(alias: str) -> None:
    marker = secrets.token_hex(4)
    with pytest.raises(Refused):
        Client().get(f"/fail/{alias}", {"db": alias, "marker": marker})
    assert stored_with(alias, marker) == []


def test_a_view_whose_transaction_commits_enqueues_exactly_one_task(alias: str) -> None:
    marker = secrets.token_hex(4)
    response = Client().get(f"/commit/{alias}", {"db": alias, "marker": marker})
    assert response.status_code == 200
    [stored] = stored_with(alias, marker)
    assert (stored.id, stored.status) == (response.json()["id"], "queued")
    assert stored.payload == {"args": [2, 3], "kwargs": {"marker": marker}}


def test_the_worker_command_runs_an_enqueued_task_and_task_result_shows_its_value(
    alias: str,
) -> None:
    result = tasks.add.using(backend=alias).enqueue(20, 22, marker=secrets.token_hex(4))
    assert result.status == TaskResultStatus.READY
    run_worker(alias)
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    assert result.finished_at is not None and result.attempts == 1


def test_task_result_reports_a_failed_task_with_its_exception_class(alias: str) -> None:
    result = tasks.explode.using(backend=alias).enqueue(secrets.token_hex(4))
    run_worker(alias)
    fetched = tasks.explode.using(backend=alias).get_result(result.id)
    assert fetched.status == TaskResultStatus.FAILED
    [error] = fetched.errors
    assert error.exception_class is ValueError
    assert "exploded" in error.traceback


def test_a_task_that_takes_context_sees_its_attempt(alias: str) -> None:
    result = tasks.attempt_number.using(backend=alias).enqueue(secrets.token_hex(4))
    run_worker(alias)
    result.refresh()
    assert result.return_value == 1


def signalled(result_id: str, received: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(kind, status) for kind, (rid, status) in received if rid == result_id]


@pytest.fixture
def received() -> Any:
    """``task_started`` and ``task_finished`` as sent: (kind, (result id, status))."""
    seen: list[tuple[str, Any]] = []

    def on_started(sender: Any, task_result: Any, **_: Any) -> None:
        seen.append(("started", (task_result.id, task_result.status)))

    def on_finished(sender: Any, task_result: Any, **_: Any) -> None:
        seen.append(("finished", (task_result.id, task_result.status)))

    task_started.connect(on_started, weak=False)
    task_finished.connect(on_finished, weak=False)
    yield seen
    task_started.disconnect(on_started)
    task_finished.disconnect(on_finished)


def test_the_worker_sends_task_started_and_task_finished_for_a_successful_run(
    alias: str, received: list[tuple[str, Any]]
) -> None:
    result = tasks.add.using(backend=alias).enqueue(1, 2, marker=secrets.token_hex(4))
    run_worker(alias)
    assert signalled(result.id, received) == [
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.SUCCESSFUL),
    ]


def test_the_worker_sends_task_finished_as_failed_for_a_task_that_raises(
    alias: str, received: list[tuple[str, Any]]
) -> None:
    result = tasks.explode.using(backend=alias).enqueue(secrets.token_hex(4))
    run_worker(alias)
    assert signalled(result.id, received)[:2] == [
        ("started", TaskResultStatus.RUNNING),
        ("finished", TaskResultStatus.FAILED),
    ]


def test_a_task_enqueued_outside_a_transaction_is_stored_at_once(alias: str) -> None:
    marker = secrets.token_hex(4)
    result = tasks.add.using(backend=alias).enqueue(1, 1, marker=marker)
    assert [t.id for t in stored_with(alias, marker)] == [result.id]


def test_a_database_alias_that_does_not_exist_is_refused_when_the_backend_is_made() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"'nowhere', which DATABASES does not define"):
        CairnQBackend("broken", {"OPTIONS": {"DATABASE": "nowhere"}})


def test_an_unknown_option_is_refused_when_the_backend_is_made() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"unknown keys \['DATABSE'\]"):
        CairnQBackend("broken", {"OPTIONS": {"DATABSE": "default"}})


def test_a_misspelt_key_of_the_entry_is_refused_naming_the_key_meant() -> None:
    with pytest.raises(
        ImproperlyConfigured,
        match=r"^TASKS\['broken'\] has unknown keys \['QUEUE'\] \(did you mean 'QUEUES'\?\); "
        r"a CairnQBackend entry takes BACKEND, QUEUES and OPTIONS$",
    ):
        CairnQBackend("broken", {"BACKEND": "x", "QUEUE": ["emails"]})


def test_a_misspelt_option_is_refused_naming_the_option_meant() -> None:
    with pytest.raises(
        ImproperlyConfigured, match=r"\['MAX_ATEMPTS'\] \(did you mean 'MAX_ATTEMPTS'\?\)"
    ):
        CairnQBackend("broken", {"OPTIONS": {"MAX_ATEMPTS": 3}})


def test_max_attempts_given_as_a_string_is_refused_when_the_backend_is_made() -> None:
    with pytest.raises(
        ImproperlyConfigured,
        match=r"^TASKS\['broken'\]\['OPTIONS'\]\['MAX_ATTEMPTS'\] must be a whole number "
        r"of runs, like 3 \(no quotes\), not '3'",
    ):
        CairnQBackend("broken", {"OPTIONS": {"MAX_ATTEMPTS": "3"}})


def test_max_attempts_below_one_is_refused_when_the_backend_is_made() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"MAX_ATTEMPTS must be >= 1"):
        CairnQBackend("broken", {"OPTIONS": {"MAX_ATTEMPTS": 0}})


def test_queues_given_as_one_string_is_refused_when_the_backend_is_made() -> None:
    with pytest.raises(
        ImproperlyConfigured, match=r"\['QUEUES'\] must be a list of queue names, like"
    ):
        CairnQBackend("broken", {"QUEUES": "emails"})


def test_options_that_are_not_a_dict_are_refused_when_the_backend_is_made() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"\['OPTIONS'\] must be a dict"):
        CairnQBackend("broken", {"OPTIONS": [("DATABASE", "default")]})


def test_a_database_that_is_not_a_name_is_refused_when_the_backend_is_made() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"\['DATABASE'\] must be the name of"):
        CairnQBackend("broken", {"OPTIONS": {"DATABASE": ["default"]}})


def test_a_schema_that_is_not_an_identifier_is_refused_when_the_backend_is_made() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"\['SCHEMA'\]: schema 'my-jobs' is not"):
        CairnQBackend("broken", {"OPTIONS": {"SCHEMA": "my-jobs"}})


def test_task_modules_given_as_one_string_is_refused_when_the_backend_is_made() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"\['TASK_MODULES'\] must be a list of"):
        CairnQBackend("broken", {"OPTIONS": {"TASK_MODULES": "myapp.jobs"}})


def test_the_app_checks_every_cairnq_entry_of_tasks_at_start_up() -> None:
    from django.apps import apps
    from django.test import override_settings

    broken = {"BACKEND": "cairnq.contrib.django.CairnQBackend", "OPTIONS": {"MAX_ATTEMPTS": "3"}}
    with (
        override_settings(TASKS={"default": broken}),
        pytest.raises(ImproperlyConfigured, match=r"\['MAX_ATTEMPTS'\] must be a whole number"),
    ):
        apps.get_app_config("cairnq").ready()


def test_a_worker_without_any_task_refuses_to_start() -> None:
    backend = task_backends["default"]
    assert isinstance(backend, CairnQBackend)
    with pytest.raises(ImproperlyConfigured, match="no tasks were found for the task backend"):
        backend.worker({})


def test_a_worker_given_a_task_module_that_does_not_import_refuses_to_start() -> None:
    with pytest.raises(CommandError, match=r"the task module 'tests\.no_such_tasks' cannot be"):
        call_command("cairnq_worker", "--module", "tests.no_such_tasks", "--until-idle")


@pytest.mark.postgres
def test_the_postgresql_backend_given_a_sqlite_connection_says_so(tmp_path: Any) -> None:
    import sqlite3

    backend = task_backends[_django.database_alias("postgres")]
    assert isinstance(backend, CairnQBackend)
    with pytest.raises(UnsupportedBackend, match=r"PostgreSQL backend runs submit\(conn=...\) on"):
        backend.client().submit("job", {}, conn=sqlite3.connect(tmp_path / "x.db"))


def test_the_sqlite_backend_given_a_connection_to_another_file_says_so(tmp_path: Any) -> None:
    import sqlite3

    backend = task_backends["default"]
    assert isinstance(backend, CairnQBackend)
    with pytest.raises(InvalidArgument, match="not on this backend's database"):
        backend.client().submit("job", {}, conn=sqlite3.connect(tmp_path / "other.db"))
