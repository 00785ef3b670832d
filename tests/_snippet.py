"""Runs one documentation snippet (a ```` ```python snippet ```` block) as written.

    python tests/_snippet.py SNIPPET_FILE

A snippet is a part of a program, not a whole one: the site's pages write them
to run inside an ``async def`` beside an open client and a worker. This runs
the file's text as the body of such a coroutine, with ``cq`` an open
``CairnQ`` and ``worker`` a ``Worker`` (not started) on ``cairnq.db`` in the
working directory, and cairnq's public names imported. It exits 0 when the
snippet ran to its end. It imports only cairnq, so it runs in any environment
that has cairnq installed (``tests/test_example_extras.py`` runs it in one with
only an example's extras).
"""

from __future__ import annotations

import ast
import asyncio
import sys
import textwrap
from typing import Any

import cairnq


async def run(path: str) -> None:
    with open(path, encoding="utf-8") as file:
        body = file.read()
    source = "async def snippet(cq, worker):\n" + textwrap.indent(body, "    ") + "\n"
    names: dict[str, Any] = {name: getattr(cairnq, name) for name in cairnq.__all__}
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    exec(compile(source, path, "exec", flags=flags, dont_inherit=True), names)
    worker = cairnq.Worker.sqlite("cairnq.db")
    try:
        async with cairnq.CairnQ.sqlite("cairnq.db") as cq:
            await names["snippet"](cq, worker)
    finally:
        await worker.close()


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1]))
