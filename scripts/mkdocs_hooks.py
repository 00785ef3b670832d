"""MkDocs hooks of the documentation site (mkdocs.yml's ``hooks``).

Code fences on the pages carry words for the tests after their language
(```` ```python exec ````, ```` ```sh run needs=cron ````: ``tests/test_site.py``
and ``tests/test_docs.py`` say what each means). Markdown renderers that follow
CommonMark, GitHub's included, take the first word as the language and ignore
the rest; MkDocs' fence extension refuses such a fence. This hook leaves the
language alone and drops the other words before the page is rendered.
"""

from __future__ import annotations

import re
from typing import Any

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+)(?P<language>\w+)[ \t]+[^{\n][^\n]*$", re.M)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """The page with each fence's words after its language removed."""
    return FENCE.sub(lambda m: f"{m['indent']}{m['fence']}{m['language']}", markdown)
