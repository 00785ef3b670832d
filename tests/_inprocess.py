"""The ``cairnq`` command run in the test process as the installed script runs in its own.

``run_cairnq`` calls the script's entry function (``cairnq.cli.console``) with
``argv``, in the conditions a user's shell gives the script: the current
directory the test names, no ``CAIRNQ_DATABASE_URL`` or ``CAIRNQ_SCHEMA``,
stdin not a terminal (``/dev/null``), nothing configured logging, stdout and
stderr captured. ``SystemExit`` becomes the exit code the process would have.

Everything is put back afterwards: the directory, the environment, stdin,
stdout, stderr, the root logger's handlers and level and cairnq's loggers,
``sys.path``, and the modules imported from the test's directory. A command
that leaves behind a thread, an open file descriptor (a connection, a file)
or a signal handler fails the test: a second call in the same process would
inherit it, as a program embedding ``main`` would. (A SQLite file watcher that
a backend the test holds open still shares belongs to the test, not the
command.)
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from cairnq import _wakeups
from cairnq._filewatch import FileWatcher
from cairnq.cli import console

HIDDEN_ENV = ("CAIRNQ_DATABASE_URL", "CAIRNQ_SCHEMA")
"""Variables the subprocess runs were started without (the test database is named by --db)."""

CAIRNQ_LOGGERS = ("cairnq", "cairnq.worker", "cairnq.client", "cairnq.postgres")
SIGNALS = (signal.SIGINT, signal.SIGTERM)
LEFT_OVER_WAIT_S = 10.0
"""How long a thread the command started may take to end after it returned."""


def _exit_code(exc: SystemExit, err: io.StringIO) -> int:
    """The status the interpreter exits with for ``exc`` (a message goes to stderr, then 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    err.write(f"{exc.code}\n")
    return 1


def _open_fds() -> dict[str, str]:
    """This process's open file descriptors and what each is open on (Linux; else none)."""
    found = {}
    with contextlib.suppress(FileNotFoundError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(FileNotFoundError):
                found[fd] = os.readlink(f"/proc/self/fd/{fd}")
    return found


def _shared_watchers() -> tuple[set[threading.Thread], set[str]]:
    """The threads and descriptors of SQLite file watchers that open backends still share.

    A worker's claim loop starts the process's watcher on its database file, and the
    watcher runs until the last backend on that file closes: after the command, that
    is the backend of the test's own client. A backend the command left open would
    still show as its writer thread and connections.
    """
    threads: set[threading.Thread] = set()
    fds: set[str] = set()
    for hub in list(_wakeups._HUBS.values()):
        watcher = hub._watcher
        if isinstance(watcher, FileWatcher) and hub._watch_users:
            threads.add(watcher._thread)
            fds |= {str(fd) for fd in (watcher._fd, watcher._stop_read, watcher._stop_write)}
    return threads, fds


def _left_open(before: dict[str, str], shared: set[str]) -> list[str]:
    """Descriptors opened since ``before`` and still open.

    A file the test already had open is left out: SQLite defers closing a
    connection's descriptor while another connection of the process holds locks
    on the same file (closing it would drop their POSIX locks).
    """
    held = set(before.values())
    return [
        f"file descriptor {fd} ({target})"
        for fd, target in sorted(_open_fds().items())
        if fd not in before and fd not in shared and target not in held
    ]


def _new_modules_under(before: set[str], where: Path) -> list[str]:
    found = []
    for name in set(sys.modules) - before:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and Path(file).resolve().is_relative_to(where):
            found.append(name)
    return found


@contextlib.contextmanager
def _logging_unconfigured() -> Iterator[None]:
    """The root logger without handlers (as in a new interpreter), put back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    kept = {
        name: (logging.getLogger(name).level, list(logging.getLogger(name).handlers))
        for name in CAIRNQ_LOGGERS
    }
    for handler in handlers:
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        for name, (was, its_handlers) in kept.items():
            logger = logging.getLogger(name)
            logger.setLevel(was)
            logger.handlers[:] = its_handlers


@contextlib.contextmanager
def like_the_script(cwd: Path | None) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """Stand in for a new ``cairnq`` process for the block; yields (stdout, stderr)."""
    saved_cwd = os.getcwd()
    saved_env = {name: os.environ.get(name) for name in HIDDEN_ENV}
    saved_path = list(sys.path)
    saved_stdin = sys.stdin
    saved_signals = {sig: signal.getsignal(sig) for sig in SIGNALS}
    modules = set(sys.modules)
    threads = set(threading.enumerate())
    out, err = io.StringIO(), io.StringIO()
    fds = _open_fds()
    left: list[str] = []
    with open(os.devnull) as devnull, _logging_unconfigured():
        sys.stdin = devnull
        try:
            for name in HIDDEN_ENV:
                os.environ.pop(name, None)
            if cwd is not None:
                os.chdir(cwd)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                yield out, err
        finally:
            sys.stdin = saved_stdin
            os.chdir(saved_cwd)
            for name, value in saved_env.items():
                if value is not None:
                    os.environ[name] = value
            sys.path[:] = saved_path
            if cwd is not None:
                for name in _new_modules_under(modules, Path(cwd).resolve()):
                    del sys.modules[name]
            for sig, handler in saved_signals.items():
                if signal.getsignal(sig) is not handler:
                    left.append(f"a {sig.name} handler")
                    signal.signal(sig, handler)
    deadline = time.monotonic() + LEFT_OVER_WAIT_S
    shared_threads, shared_fds = _shared_watchers()
    for thread in set(threading.enumerate()) - threads - shared_threads:
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            left.append(f"thread {thread.name!r}")
    left += _left_open(fds, shared_fds)
    if left:
        raise AssertionError(f"the command left behind: {', '.join(left)}")


def run_cairnq(*argv: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """``cairnq ARGV`` in this process: (exit code, stdout, stderr)."""
    with like_the_script(cwd) as (out, err):
        saved_argv = sys.argv
        sys.argv = ["cairnq", *argv]
        try:
            console()
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc, err)
        finally:
            sys.argv = saved_argv
    return code, out.getvalue(), err.getvalue()
