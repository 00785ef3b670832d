"""The ``cairnq`` command. Each command is a function of (arguments, output stream)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from .errors import CairnQError

DEFAULT_DB = "cairnq.db"


def _database(args: argparse.Namespace) -> str:
    return str(args.db or os.environ.get("CAIRNQ_DATABASE_URL") or DEFAULT_DB)


def _cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from .demo import run_demo

    return asyncio.run(run_demo(args.path, out))


def _cmd_conformance(args: argparse.Namespace, out: TextIO) -> int:
    from .conformance import run_paths

    results = run_paths(args.paths, _database(args), real_clock=args.real_clock, out=out)
    return 0 if results and all(r.passed for r in results) else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cairnq",
        description="A durable task runtime on SQLite and PostgreSQL.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run sample tasks through a worker on a local SQLite file",
        description="Submit sample tasks, run a worker on them with live progress, "
        "and print a summary. Exits 0 when every task succeeded.",
        epilog="example: cairnq demo --path /tmp/demo.db",
    )
    demo.add_argument("--path", default="cairnq-demo.db", help="SQLite file (cairnq-demo.db)")
    demo.set_defaults(run=_cmd_demo)

    conformance = commands.add_parser(
        "conformance",
        help="run protocol scenario files against a backend",
        description="Run conformance scenarios (JSON). Each scenario gets a fresh store: a "
        "temporary SQLite file, or a throwaway schema in the PostgreSQL database given.",
        epilog="example: cairnq conformance scenarios/ --db postgresql://localhost/test",
    )
    conformance.add_argument("paths", nargs="+", help="scenario files or directories")
    conformance.add_argument("--db", help="database URL (picks the backend)")
    conformance.add_argument(
        "--real-clock", action="store_true", help="really sleep in sleep steps"
    )
    conformance.set_defaults(run=_cmd_conformance)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code.

    Errors print one line to stderr (a traceback only with ``--debug``).
    """
    out = out or sys.stdout
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        code: int = args.run(args, out)
    except (CairnQError, OSError) as exc:
        if args.debug:
            raise
        sys.stderr.write(f"cairnq: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    return code


def console() -> None:  # pragma: no cover - the installed script
    sys.exit(main())
