"""``cairnq demo`` and ``cairnq conformance``: sample runs on a fresh store."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import TextIO

from ._target import DEFAULT_DB


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq demo``."""
    from ..demo import run_demo

    return asyncio.run(run_demo(args.path, out))


def _database(args: argparse.Namespace) -> str:
    return str(args.db or os.environ.get("CAIRNQ_DATABASE_URL") or DEFAULT_DB)


def cmd_conformance(args: argparse.Namespace, out: TextIO) -> int:
    """``cairnq conformance``: every scenario passed -> 0."""
    from ..conformance import run_paths

    results = run_paths(
        args.paths, _database(args), real_clock=args.real_clock, out=out, via=args.via
    )
    return 0 if results and all(r.passed for r in results) else 1
