"""One Django project per test process: SQLite as ``default``, PostgreSQL as ``pg``.

Django is configured once per process, so every Django test shares these
settings: the task backends ``default`` (on the SQLite database) and ``pg`` (on
a PostgreSQL database made for this process, when the server is reachable).
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile
from typing import Any

import pytest

django = pytest.importorskip("django", reason="Django is not installed (pip install django)")

from django.conf import settings  # noqa: E402

PG_URL = os.environ.get("CAIRNQ_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("CAIRNQ_REQUIRE_POSTGRES") == "1"
PG_PROBLEM: str | None = None


def _pg_database() -> dict[str, Any] | None:
    """A PostgreSQL database for this process, dropped at exit; ``None`` when unreachable."""
    global PG_PROBLEM
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        admin = psycopg.connect(PG_URL, autocommit=True, connect_timeout=5)
    except Exception as exc:
        PG_PROBLEM = f"PostgreSQL not reachable at {PG_URL}: {exc}"
        return None
    name = f"cairnq_django_{os.getpid()}_{secrets.token_hex(3)}"
    with admin:
        admin.execute(f'create database "{name}"')

    def drop() -> None:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')

    atexit.register(drop)
    info = conninfo_to_dict(PG_URL)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": info.get("user", ""),
        "HOST": info.get("host", ""),
        "PORT": info.get("port", ""),
        "PASSWORD": info.get("password", ""),
    }


def setup() -> None:
    """Configure Django for the tests (once per process) and migrate its SQLite database."""
    if settings.configured:
        return
    folder = tempfile.mkdtemp(prefix="cairnq-django-")
    atexit.register(shutil.rmtree, folder, True)
    databases: dict[str, Any] = {
        "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": f"{folder}/app.db"}
    }
    tasks: dict[str, Any] = {
        "default": {
            "BACKEND": "cairnq.contrib.django.CairnQBackend",
            "OPTIONS": {"MAX_ATTEMPTS": 1},
        },
    }
    pg = _pg_database()
    if pg is not None:
        databases["pg"] = pg
        tasks["pg"] = {
            "BACKEND": "cairnq.contrib.django.CairnQBackend",
            "OPTIONS": {"DATABASE": "pg", "MAX_ATTEMPTS": 1},
        }
    import importlib.util

    tasks_app = [] if importlib.util.find_spec("django.tasks") else ["django_tasks"]
    settings.configure(
        ROOT_URLCONF="tests.django_app.urls",
        ALLOWED_HOSTS=["testserver", "app.test"],
        SECRET_KEY="test-only",
        USE_TZ=True,
        DATABASES=databases,
        TASKS=tasks,
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            *tasks_app,
            "cairnq.contrib.django",
            "tests.django_app",
        ],
        MIDDLEWARE=[],
        LOGIN_URL="/login/",
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, database="default")


def database_alias(kind: str) -> str:
    """The ``DATABASES`` and ``TASKS`` alias of a backend kind, skipping when it is missing."""
    setup()
    if kind == "sqlite":
        return "default"
    if "pg" not in settings.DATABASES:
        if REQUIRE_PG:
            pytest.fail(f"{PG_PROBLEM} (CAIRNQ_REQUIRE_POSTGRES=1)", pytrace=False)
        pytest.skip(PG_PROBLEM or "PostgreSQL not configured")
    return "pg"
