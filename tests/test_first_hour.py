"""The first hour of a new user, scripted: the README's Quick start, then the CLI page.

Everything runs as a user would run it, in a fresh directory: the Quick start
program saved to a file and run with ``python``, then the real ``cairnq``
command in subprocesses, in the order ``docs/cli.md`` gives. Along the way the
script makes the mistakes new users make (a typo in a task name, a queue
nobody serves, a worker on another database, a misspelt or mistyped database,
a handler that cannot take the context, a handler that raises) and checks that
each is reported on the terminal within ``REPORTED_WITHIN_S``, an upper bound
on waiting, not a speed claim.

SQLite only: the Quick start is the embedded default.
"""

from __future__ import annotations

import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ._streams import Lines

ROOT = Path(__file__).resolve().parents[1]
CAIRNQ = str(Path(sys.executable).parent / "cairnq")
REPORTED_WITHIN_S = 5.0
TASK_ID = re.compile(r"\btask_[0-9A-Z]{26}\b")

NO_CONTEXT = """\
from cairnq import Worker

worker = Worker.sqlite("cairnq.db")


@worker.task("email.send")
async def send(payload):
    return payload
"""


NO_LOGGING = """\
import asyncio
from cairnq import CairnQ, Worker

worker = Worker.sqlite("quiet.db", retry_backoff_ms=0)


@worker.task("email.send")
async def send(ctx, payload):
    raise ValueError(f"not an address: {payload['to']!r}")


async def main():
    async with CairnQ.sqlite("quiet.db") as cq, worker.background():
        task = await cq.submit("email.send", {"to": "nobody"}, max_attempts=2)
        print((await cq.wait(task.id)).status)


asyncio.run(main())
"""


class Process:
    """A long-running ``cairnq`` command (a worker), its stdout and stderr followed live."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [CAIRNQ, *args],
            cwd=cwd,
            env=env or _env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.out = Lines(self.proc.stdout)
        self.err = Lines(self.proc.stderr)

    def stop(self) -> int:
        """SIGINT (Ctrl-C), as a user stops a worker; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRNQ_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """One ``cairnq`` command to its end."""
    return subprocess.run(
        [CAIRNQ, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout
    )


def timed(cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """One ``cairnq`` command and how long it took to answer."""
    started = time.monotonic()
    result = run(cwd, *args)
    return result, time.monotonic() - started


# Where each text the first hour follows is written.
QUICK_START = ("README.md", "## Quick start")
COMMAND_LINE = ("docs/cli.md", "# The command line")


def page_section(where: tuple[str, str]) -> str:
    """The text of page ``where[0]`` under heading ``where[1]``, up to the next heading."""
    page, heading = where
    text = (ROOT / page).read_text(encoding="utf-8")
    return text.split(heading + "\n", 1)[1].split("\n#", 1)[0]


def page_commands(where: tuple[str, str]) -> list[list[str]]:
    """The commands of the first ``sh`` block under ``where``'s heading, comments dropped and
    ``a  |  b`` alternatives split, each as its arguments after ``cairnq``."""
    block = re.findall(r"```sh\n(.*?)```", page_section(where), re.S)[0]
    commands = []
    for line in block.splitlines():
        for command in line.split("  #", 1)[0].split(" |  "):
            words = shlex.split(command)
            assert words[0] == "cairnq", line
            commands.append(words[1:])
    return commands


def page_python(where: tuple[str, str]) -> str:
    """The first Python block under ``where``'s heading, as the page shows it."""
    return re.findall(r"```python\n(.*?)```", page_section(where), re.S)[0]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh project directory holding the CLI page's ``app/tasks.py``."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "tasks.py").write_text(page_python(COMMAND_LINE))
    return tmp_path


# The CLI page's command-line block, in its order; the test below runs each where
# its comment says, with the ids the earlier commands printed.
CLI_COMMANDS = [
    ["migrate"],
    ["worker", "app.tasks:worker", "--queues", "emails,default", "--concurrency", "8"],
    ["submit", "email.send", '{"to": "ada@example.com"}', "--key", "welcome:ada", "--wait"],
    ["submit", "report.build", "--delay", "5m"],
    ["ls", "--status", "failed", "--queue", "emails"],
    ["get", "task_01J..."],
    ["get", "--key", "welcome:ada"],
    ["cancel", "task_01J...", "task_01K...", "--key", "welcome:ada"],
    ["retry", "--key", "welcome:ada", "--reset-attempt"],
    ["purge", "--older-than", "7d", "--status", "succeeded", "--dry-run"],
    ["stats"],
    ["top"],
]


def test_the_cli_page_command_block_is_the_one_the_first_hour_runs() -> None:
    assert page_commands(COMMAND_LINE) == CLI_COMMANDS


def test_the_first_hour_reports_every_mistake_on_the_terminal(home: Path) -> None:
    commands = iter(CLI_COMMANDS)

    # The Quick start: one program, worker inside; then the CLI sees the same database.
    (home / "quickstart.py").write_text(page_python(QUICK_START))
    quick = subprocess.run(
        [sys.executable, "quickstart.py"],
        cwd=home,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert quick.returncode == 0, quick.stderr
    assert "'ok': True" in quick.stdout and "'rows': 42" in quick.stdout
    listed = run(home, "ls")
    assert listed.returncode == 0, listed.stderr
    assert "resize" in listed.stdout and "reports.monthly" in listed.stdout

    # cairnq migrate: the Quick start made the database already.
    migrated = run(home, *next(commands))
    assert migrated.returncode == 0, migrated.stderr
    assert f"{home / 'cairnq.db'} is up to date" in migrated.stdout

    # Mistake: a handler written without the context is refused when the worker loads.
    (home / "app" / "nocontext.py").write_text(NO_CONTEXT)
    refused, took = timed(home, "worker", "app/nocontext.py")
    assert refused.returncode != 0
    assert "ctx" in refused.stderr and "payload" in refused.stderr, refused.stderr
    assert took < REPORTED_WITHIN_S

    # cairnq worker: it says where it is, its database in full and the tasks it handles.
    worker = Process(next(commands), home)
    try:
        worker.out.until(f"database: {home / 'cairnq.db'}", REPORTED_WITHIN_S)
        worker.out.until("queues emails,default", REPORTED_WITHIN_S)
        worker.out.until("tasks: email.send", REPORTED_WITHIN_S)

        waited = run(home, *next(commands))
        assert waited.returncode == 0, waited.stderr
        assert TASK_ID.search(waited.stdout.splitlines()[0]), waited.stdout
        assert "succeeded" in waited.stdout

        # A task nobody handles, delayed: stored, and said at once that no worker serves it.
        report, took = timed(home, *next(commands))
        assert report.returncode == 0, report.stderr
        assert "no live cairnq worker" in report.stderr and "'report.build'" in report.stderr
        assert took < REPORTED_WITHIN_S
        report_id = _id(report.stdout)

        # Mistake: a typo in the task name. Said at once, with the name meant.
        typo, took = timed(home, "submit", "emial.send", '{"to": "ada@example.com"}')
        assert typo.returncode == 0
        assert "no live cairnq worker" in typo.stderr and "'email.send'" in typo.stderr
        assert str(home / "cairnq.db") in typo.stderr
        assert took < REPORTED_WITHIN_S
        typo_id = _id(typo.stdout)

        # Mistake: a queue nobody serves.
        nobody, took = timed(home, "submit", "email.send", "{}", "--queue", "emial")
        assert "no live cairnq worker" in nobody.stderr and "queue 'emial'" in nobody.stderr
        assert took < REPORTED_WITHIN_S

        # Mistake: a payload the handler refuses, on a queue the worker serves. The worker
        # logs one line at warning (a retry follows), naming the task and the error.
        failing = run(home, "submit", "email.send", '{"to": "nobody"}', "--queue", "emails")
        assert failing.returncode == 0, failing.stderr
        failing_id = _id(failing.stdout)
        retried = worker.err.until(failing_id, REPORTED_WITHIN_S)
        assert "WARNING" in retried and "ValueError: not an address: 'nobody'" in retried

        listed = run(home, *next(commands))
        assert listed.returncode == 0, listed.stderr

        got = run(home, *_with_ids(next(commands), report_id, typo_id))
        assert got.returncode == 0 and f'"id": "{report_id}"' in got.stdout, got.stderr
        by_key = run(home, *next(commands))
        assert by_key.returncode == 0 and '"status": "succeeded"' in by_key.stdout

        # Cancel two ids and a key: the ids are canceled; the key's task already succeeded,
        # which is said for it alone (exit 1).
        canceled = run(home, *_with_ids(next(commands), report_id, typo_id))
        assert canceled.returncode == 1
        assert f"{report_id} canceled" in canceled.stdout + canceled.stderr
        assert f"{typo_id} canceled" in canceled.stdout + canceled.stderr
        assert "already succeeded; nothing to cancel" in canceled.stderr

        retried = run(home, *next(commands))
        assert retried.returncode == 1
        assert "already succeeded; only failed or canceled tasks can be retried" in retried.stderr

        purged = run(home, *next(commands))
        assert purged.returncode == 0, purged.stderr
        assert "nothing to purge" in purged.stdout

        stats = run(home, *next(commands))
        assert stats.returncode == 0 and "emial" in stats.stdout

        # cairnq top, once (not a terminal: it would refresh until killed): the queued
        # task nobody serves is flagged.
        top = run(home, *next(commands), "-n", "1")
        assert top.returncode == 0, top.stderr
        assert "unserved: email.send on emial" in top.stdout

        # The refused payload's last attempt ends it (after two backoffs, whatever the
        # commands above took) before the worker stops.
        worker.err.until("attempt 3/3 on queue emails: failed after", 30)
    finally:
        assert worker.stop() == 0
    # Retries are one line each; the final failure's traceback shows the handler's frames.
    log = worker.err.rest(30)
    assert [log[n - 1] for n, line in enumerate(log) if line.startswith("Traceback")] == [
        worker.err.until("attempt 3/3 on queue emails: failed after", 0)
    ], log
    assert {line.split(",")[0] for line in log if line.lstrip().startswith("File ")} == {
        f'  File "{home / "app" / "tasks.py"}"'
    }, log

    # Mistake: a handler that raises, in a program that configures no logging. Python
    # prints the warnings and errors: a retry in one line, then the final failure with
    # the handler's frames only.
    (home / "noisy.py").write_text(NO_LOGGING)
    started = time.monotonic()
    noisy = subprocess.run(
        [sys.executable, "noisy.py"], cwd=home, env=_env(), capture_output=True, text=True
    )
    assert time.monotonic() - started < REPORTED_WITHIN_S
    assert noisy.stdout == "failed\n", noisy.stderr
    retry, final, *trace = noisy.stderr.splitlines()
    assert "attempt 1/2" in retry and "retrying in" in retry, noisy.stderr
    assert retry.endswith("ValueError: not an address: 'nobody'")
    assert "attempt 2/2" in final and "failed after" in final, noisy.stderr
    assert trace[0] == "Traceback (most recent call last):", noisy.stderr
    frames = [line for line in trace if line.lstrip().startswith("File ")]
    assert frames == [f'  File "{home / "noisy.py"}", line 9, in send'], noisy.stderr

    # Mistake: a database name mistyped. Nothing is created, the full path is named.
    mistyped, took = timed(home, "--db", "taks.db", "submit", "email.send", "{}")
    assert mistyped.returncode == 1
    assert f"no cairnq database at {home / 'taks.db'}" in mistyped.stderr
    assert not (home / "taks.db").exists()
    assert took < REPORTED_WITHIN_S

    # Mistake: a SQLite URL misspelt. Refused with the right spelling.
    misspelt, took = timed(home, "--db", "sqlite:cairnq.db", "ls")
    assert misspelt.returncode != 0
    assert "sqlite:///cairnq.db" in misspelt.stderr
    assert not (home / "sqlite:cairnq.db").exists()
    assert took < REPORTED_WITHIN_S

    # Mistake: a queue misspelt in a pause. Paused all the same, with one warning line
    # naming the queue meant.
    paused, took = timed(home, "pause", "emials")
    assert paused.returncode == 0, paused.stderr
    (warning,) = paused.stderr.splitlines()
    assert "queue emials holds no task and no worker serves it" in warning
    assert "did you mean" in warning
    assert took < REPORTED_WITHIN_S
    assert run(home, "resume", "emials").returncode == 0

    # Mistake: a negative duration. Refused as negative in one line, not taken for an option.
    negative, took = timed(home, "submit", "email.send", "{}", "--delay", "-5m")
    assert negative.returncode == 2
    (refusal,) = negative.stderr.splitlines()
    assert "duration '-5m' is negative" in refusal
    assert took < REPORTED_WITHIN_S

    # Mistake: the worker on another database. Its banner names it, and a submit to the
    # default database says no live worker serves it there, without hanging.
    other = Process(["worker", "app.tasks:worker", "--db", "other.db"], home)
    try:
        other.out.until(f"database: {home / 'other.db'}", REPORTED_WITHIN_S)
        started = time.monotonic()
        lost = subprocess.Popen(
            [CAIRNQ, "submit", "email.send", '{"to": "bob@example.com"}', "--wait"],
            cwd=home,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert lost.stdout is not None and lost.stderr is not None
        out, err = Lines(lost.stdout), Lines(lost.stderr)
        assert TASK_ID.search(out.until("queued", REPORTED_WITHIN_S))
        err.until(f"no live cairnq worker on {home / 'cairnq.db'}", REPORTED_WITHIN_S)
        assert time.monotonic() - started < REPORTED_WITHIN_S
        lost.send_signal(signal.SIGINT)
        assert lost.wait(timeout=30) == 130
        err.until("cairnq get task_", REPORTED_WITHIN_S)
    finally:
        assert other.stop() == 0

    # $CAIRNQ_DATABASE_URL names the database for the worker too, as for every command:
    # a worker whose code names cairnq.db serves shared.db, and says so at start.
    shared = {**_env(), "CAIRNQ_DATABASE_URL": "shared.db"}
    moved = Process(["worker", "app.tasks:worker", "--queues", "emails,default"], home, shared)
    try:
        moved.out.until(
            f"database: {home / 'shared.db'} (from $CAIRNQ_DATABASE_URL)", REPORTED_WITHIN_S
        )
        started = time.monotonic()
        served = subprocess.run(
            [CAIRNQ, "submit", "email.send", '{"to": "eve@example.com"}', "--wait"],
            cwd=home,
            env=shared,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert served.returncode == 0 and "succeeded" in served.stdout, served.stderr
        assert time.monotonic() - started < REPORTED_WITHIN_S
    finally:
        assert moved.stop() == 0
    assert list(commands) == []


def _id(output: str) -> str:
    found = TASK_ID.search(output)
    assert found is not None, output
    return found.group()


def _with_ids(command: list[str], *ids: str) -> list[str]:
    """``command`` with the CLI page's placeholder ids (``task_01J...``) replaced, in order."""
    given = iter(ids)
    return [next(given) if word.startswith("task_01") else word for word in command]


DJANGO_APPS = """
import importlib.util

INSTALLED_APPS += ["cairnq.contrib.django"]
if importlib.util.find_spec("django.tasks") is None:  # before Django 6: the backport
    INSTALLED_APPS.insert(0, "django_tasks")
"""

DASHBOARD_PROBE = """\
import asyncio
import os

import httpx

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
from mysite.asgi import application


async def main():
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        first = await http.get("/cairnq/")
        print(first.status_code, first.headers.get("location"), first.text)
        if first.status_code == 302:
            print((await http.get(first.headers["location"])).status_code)


asyncio.run(main())
"""


# Several Python processes importing Django: in the processes lane, one at a time.
@pytest.mark.slow
def test_a_fresh_django_project_reports_its_mistakes_at_start_up(tmp_path: Path) -> None:
    pytest.importorskip("django")
    pytest.importorskip("httpx")
    made = subprocess.run(
        [sys.executable, "-m", "django", "startproject", "mysite", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    settings = tmp_path / "mysite" / "settings.py"
    fresh = settings.read_text() + DJANGO_APPS

    def check(tasks: str) -> tuple[str, float]:
        """``manage.py check`` with ``TASKS = tasks``: its last line and the CPU time it took."""
        settings.write_text(f"{fresh}\nTASKS = {tasks}\n")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [sys.executable, "manage.py", "check"],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0, done.stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # Its CPU time: on a quiet machine the wall time, and not the machine's load.
        took = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return done.stderr.splitlines()[-1], took

    backend = '"BACKEND": "cairnq.contrib.django.CairnQBackend"'
    # Mistake: a key misspelt. Refused at start-up, naming the key meant.
    said, took = check(f'{{"default": {{{backend}, "QUEUE": ["default", "emails"]}}}}')
    assert said.endswith(
        "ImproperlyConfigured: TASKS['default'] has unknown keys ['QUEUE'] "
        "(did you mean 'QUEUES'?); a CairnQBackend entry takes BACKEND, QUEUES and OPTIONS"
    ), said
    assert took < REPORTED_WITHIN_S

    # Mistake: a number written as a string. Refused at start-up, not at the first enqueue.
    said, took = check(f'{{"default": {{{backend}, "OPTIONS": {{"MAX_ATTEMPTS": "3"}}}}}}')
    assert "TASKS['default']['OPTIONS']['MAX_ATTEMPTS'] must be a whole number" in said, said
    assert took < REPORTED_WITHIN_S

    # The dashboard behind Django's sign-in: with no LOGIN_URL set, the admin's sign-in
    # page (the fresh project has the admin) rather than /accounts/login/, which is a 404.
    settings.write_text(f"{fresh}\nTASKS = {{'default': {{{backend}}}}}\n")
    asgi = tmp_path / "mysite" / "asgi.py"
    asgi.write_text(
        asgi.read_text()
        + "\nfrom cairnq.contrib.django import dashboard_application\n\n"
        + "application = dashboard_application(application)\n"
    )
    (tmp_path / "probe.py").write_text(DASHBOARD_PROBE)

    def probe() -> list[str]:
        done = subprocess.run(
            [sys.executable, "probe.py"],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert probe() == ["302 /admin/login/?next=%2Fcairnq%2F ", "200"]

    # Without the admin and without LOGIN_URL, the page says what to set.
    (tmp_path / "mysite" / "urls.py").write_text("urlpatterns = []\n")
    [said] = probe()
    assert said.startswith("401 None Sign in first: ") and "Set LOGIN_URL in settings.py" in said
