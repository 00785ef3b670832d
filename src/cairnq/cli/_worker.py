"""``cairnq worker``: import the application's Worker and serve it."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ..protocol import ops as _ops
from ._errors import CommandError, a_or_an

if TYPE_CHECKING:
    from ..worker import Worker


def load_worker(spec: str) -> Worker:
    """Import ``MODULE:ATTR`` (``ATTR`` defaults to ``worker``) and return that ``Worker``.

    The current directory goes first on ``sys.path``, as with ``python -m``.

    Raises:
        CommandError: the spec is malformed, the import fails, or ATTR is no Worker.
    """
    from ..worker import Worker

    module_name, _, attr = spec.partition(":")
    attr = attr or "worker"
    if not all(p.isidentifier() for p in [*module_name.split("."), *attr.split(".")]):
        raise CommandError(f"invalid worker {spec!r}: use MODULE:ATTR, e.g. app.tasks:worker")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name + ".").startswith(exc.name + "."):
            raise CommandError(
                f"no module named {exc.name!r} (looked in {cwd} and sys.path)"
            ) from exc
        raise CommandError(f"importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:
        raise CommandError(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise CommandError(f"module {module_name!r} has no attribute {attr!r}")
        value = getattr(value, part)
    if not isinstance(value, Worker):
        kind = a_or_an(type(value).__name__)
        raise CommandError(f"{module_name}:{attr} is {kind}, not a cairnq Worker")
    return value


def cmd_worker(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq worker``: serve a Worker from the application's code."""
    worker = load_worker(args.target)
    if args.queues is not None:
        names = [q.strip() for q in args.queues.split(",") if q.strip()]
        if not names:
            raise CommandError("--queues needs at least one queue name", code=2)
        worker.queues = _ops.check_names(names, "queues")
    if args.concurrency is not None:
        worker.concurrency = _ops.check_int(args.concurrency, "concurrency", low=1, high=100_000)
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=args.log_level.upper(),
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    out.write(
        f"cairnq worker {worker.worker_id}: queues {','.join(worker.queues)}, "
        f"concurrency {worker.concurrency}; Ctrl-C to stop\n"
    )
    out.flush()
    worker.serve(until_idle=args.until_idle)
    out.write(f"cairnq worker {worker.worker_id}: stopped\n")
    return 0
