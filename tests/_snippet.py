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

A block that needs more than a client and a worker to run, and a check of what it
did, has a harness (``tests/_doc_harness.py``): a coroutine body holding the line
``#>> block`` where the block goes, indented as that line is. What the harness
puts before the marker is the block's hidden setup, what it puts after is the
check; a harness that puts the marker inside a handler runs the block as the
handler's body.
"""

from __future__ import annotations

import ast
import asyncio
import sys
import textwrap
from typing import Any

import cairnq

MARKER = "#>> block"


def placed(body: str, harness: str) -> str:
    """``harness`` with ``body`` in place of its marker line, at the marker's indent."""
    lines = harness.splitlines()
    [at] = [i for i, line in enumerate(lines) if line.strip() == MARKER]
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    return "\n".join([*lines[:at], textwrap.indent(body, indent), *lines[at + 1 :]])


async def run(path: str, harness: str | None = None, **given: Any) -> None:
    """Run the snippet at ``path`` (in ``harness``, when given; ``given`` are more
    names it sees)."""
    with open(path, encoding="utf-8") as file:
        body = file.read()
    if harness is not None:
        body = placed(body, textwrap.dedent(harness))
    source = "async def snippet(cq, worker):\n" + textwrap.indent(body, "    ") + "\n"
    names: dict[str, Any] = {name: getattr(cairnq, name) for name in cairnq.__all__}
    names.update(given)
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
