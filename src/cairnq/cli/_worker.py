"""``cairnq worker``: import the application's Worker and serve it."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .._checks import check_int, check_names
from ..backends import description_of, open_backend
from ..logging import JsonFormatter
from ._errors import CommandError, a_or_an
from ._style import LevelColours
from ._target import resolve_target

if TYPE_CHECKING:
    from ..worker import Worker

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _split(spec: str) -> tuple[str, str]:
    """``(where, attr)``: the last ``:`` splits off the attribute when dotted names follow it."""
    where, colon, attr = spec.rpartition(":")
    if colon and attr and all(p.isidentifier() for p in attr.split(".")):
        return where, attr
    if colon and not attr:
        return where, "worker"
    return spec, "worker"


def _is_path(where: str) -> bool:
    return where.endswith(".py") or "/" in where or os.sep in where


def _import_file(where: str) -> tuple[Any, str]:
    """Import the file ``where`` names; returns the module and its name.

    The file's directory goes first on ``sys.path``, or, when that directory is a
    package (it holds ``__init__.py``), the first directory above the packages:
    ``app/tasks.py`` in a package ``app`` is imported as ``app.tasks``, so its
    relative imports work.
    """
    path = Path(where)
    if path.suffix != ".py":
        raise CommandError(f"invalid worker {where!r}: a file path must end in .py")
    if not path.is_file():
        shown = path if path.is_absolute() else f"{path} (in {os.getcwd()})"
        if path.exists():
            raise CommandError(f"{shown} is not a file")
        raise CommandError(f"no such file: {shown}")
    path = path.resolve()
    parts = [path.stem]
    root = path.parent
    while (root / "__init__.py").is_file() and root.parent != root:
        parts.insert(0, root.name)
        root = root.parent
    if not all(p.isidentifier() for p in parts):
        raise CommandError(f"cannot import {where}: {'.'.join(parts)!r} is not a module name")
    name = ".".join(parts)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return _import(name, f"looked in {root}"), name


def _import(module_name: str, where: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise CommandError(f"no module named {exc.name!r} ({where})") from exc
        raise CommandError(f"importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:
        raise CommandError(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def load_worker(spec: str) -> Worker:
    """Import ``MODULE:ATTR`` or ``path/to/file.py:ATTR`` and return that ``Worker``.

    ``ATTR`` defaults to ``worker``. For a module, the current directory goes
    first on ``sys.path``, as with ``python -m``; a file is imported by its path,
    with its directory (or the directory above its packages) on ``sys.path``.

    Raises:
        CommandError: the spec is malformed, the file is missing, the import
            fails, or ATTR is no Worker.
    """
    from ..worker import Worker

    where, attr = _split(spec)
    if _is_path(where):
        module, module_name = _import_file(where)
    else:
        module_name = where
        if not all(p.isidentifier() for p in [*module_name.split("."), *attr.split(".")]):
            raise CommandError(
                f"invalid worker {spec!r}: use MODULE:ATTR (app.tasks:worker) "
                "or FILE.py:ATTR (app/tasks.py:worker)"
            )
        cwd = os.getcwd()
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
        module = _import(module_name, f"looked in {cwd} and sys.path")
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise CommandError(f"module {module_name!r} has no attribute {attr!r}")
        value = getattr(value, part)
    if not isinstance(value, Worker):
        kind = a_or_an(type(value).__name__)
        raise CommandError(f"{module_name}:{attr} is {kind}, not a cairnq Worker")
    return value


def _follow_environment(worker: Worker, spec: str, err: TextIO) -> str:
    """Serve the database ``$CAIRNQ_DATABASE_URL`` names, as every other command does.

    Nothing moves when the variable is unset or names the database the Worker
    already serves (it keeps its own backend options then). A Worker built with an
    open client cannot move: one line on ``err`` says which database it serves
    instead. Returns what the banner adds after the database ("" or where it came from).
    """
    if not os.environ.get("CAIRNQ_DATABASE_URL"):
        return ""
    target = resolve_target(None, None)
    own = description_of(worker.client.backend)
    if target.describe() == own:
        return ""
    if not worker.owns_database:
        err.write(
            f"cairnq worker: $CAIRNQ_DATABASE_URL names {target.describe()}, but {spec} was "
            f"built with an open client and serves {own}; unset the variable, or build the "
            "Worker from a URL or path to follow it\n"
        )
        err.flush()
        return ""
    options = target.backend_options(migrate=True, tool="worker")
    options = {k: v for k, v in options.items() if k in ("schema", "migrate")}
    worker._move_to(open_backend(target.location, **options))
    return " (from $CAIRNQ_DATABASE_URL)"


def _move(worker: Worker, spec: str, args: argparse.Namespace) -> None:
    """Point ``worker`` at the database ``--db`` / ``--schema`` name.

    Raises:
        CommandError: the Worker was given an open client or backend.
    """
    if not worker.owns_database:
        raise CommandError(
            f"{spec} was built with an open client; --db cannot move it "
            "(build it from a URL or path, e.g. Worker.sqlite('tasks.db'), to choose "
            "the database at the command line)"
        )
    if args.db is None and not os.environ.get("CAIRNQ_DATABASE_URL"):
        raise CommandError(
            "--schema alone cannot move the worker: name its database with --db "
            "(or $CAIRNQ_DATABASE_URL) too",
            code=2,
        )
    target = resolve_target(args.db, args.schema)
    options = target.backend_options(migrate=True, tool="worker")
    # The new backend gets its defaults (a new SQLite file mode 0600, default pool
    # sizes): the options of the Worker's own backend belong to its own database.
    options = {k: v for k, v in options.items() if k in ("schema", "migrate")}
    worker._move_to(open_backend(target.location, **options))


def _configure_logging(level: str, log_format: str) -> None:
    """Log to stderr when nothing configured logging: cairnq's loggers at ``level``."""
    if logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else LevelColours(TEXT_FORMAT, sys.stderr)
    )
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("cairnq").setLevel(level.upper())


def banner(worker: Worker, source: str = "") -> str:
    """What ``cairnq worker`` prints at start: id, queues, concurrency, database and tasks.

    ``source`` follows the database: where it was named, when not in the code.
    """
    return (
        f"cairnq worker {worker.worker_id}: queues {','.join(worker.queues)}, "
        f"concurrency {worker.concurrency}; Ctrl-C to stop\n"
        f"  database: {description_of(worker.client.backend)}{source}\n"
        f"  tasks: {', '.join(worker.registry.names()) or '(none registered)'}\n"
    )


def cmd_worker(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq worker``: serve a Worker from the application's code."""
    worker = load_worker(args.target)
    source = ""
    if args.db is not None or args.schema is not None:
        _move(worker, args.target, args)
    else:
        source = _follow_environment(worker, args.target, sys.stderr)
    if args.queues is not None:
        names = [q.strip() for q in args.queues.split(",") if q.strip()]
        if not names:
            raise CommandError("--queues needs at least one queue name", code=2)
        worker.queues = check_names(names, "queues")
    if args.concurrency is not None:
        worker.concurrency = check_int(args.concurrency, "concurrency", low=1, high=100_000)
    _configure_logging(args.log_level, args.log_format)
    out.write(banner(worker, source))
    out.flush()
    worker.serve(until_idle=args.until_idle)
    out.write(f"cairnq worker {worker.worker_id}: stopped\n")
    return 0
