"""The documentation site builds in strict mode, and its examples and the README's run.

``mkdocs build --strict`` fails on a broken link or anchor, a page left out of
``mkdocs.yml``'s nav, or a docstring the API reference cannot read. Every
```` ```python ```` block of the README and of ``docs/`` compiles (top-level
``await`` allowed: the snippets that run inside an ``async def`` say so), and a
block marked ```` ```python exec ```` is a complete program that runs, as
written, in a fresh directory. A block marked ```` ```python snippet ```` is part
of a program: it runs as the body of an ``async def`` given an open client
``cq`` and a ``worker`` (``tests/_snippet.py``). Blocks marked ``foreign`` show
another library's code (the "Coming from ..." pages); they compile, and are not
run. ``RUN_ELSEWHERE`` names the blocks other tests run, and
``COMPILED_ONLY`` any that only compile (each says why). A block that needs
what its page does not show (a handler around it, a failed task, the reader's
payment gateway) runs in a harness of ``tests/_doc_harness.py``: hidden setup
before it, a check of its outcome after it.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from . import _doc_harness, _snippet
from ._db import drop_schema

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.S | re.M)
EXCLUDED = ("design", "soak")  # not pages of the site (mkdocs.yml's exclude_docs)


def pages() -> list[Path]:
    """The README and every page of the site."""
    found = sorted(
        p
        for p in (ROOT / "docs").rglob("*.md")
        if p.relative_to(ROOT / "docs").parts[0] not in EXCLUDED
    )
    return [ROOT / "README.md", *found]


def blocks(language: str) -> list[tuple[str, list[str], str]]:
    """(where, info words, body) of every ``language`` block of the README and the site."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            if match.group(1) == language:
                line = text.count("\n", 0, match.start()) + 1
                where = f"{page.relative_to(ROOT)}:{line}"
                found.append((where, match.group(2).split(), match.group(3)))
    return found


def first_line(where: str, body: str) -> tuple[str, str]:
    return where.split(":")[0], body.splitlines()[0]


PYTHON = blocks("python")
PROGRAMS = [(where, body) for where, words, body in PYTHON if "exec" in words]
SNIPPETS = [(where, body) for where, words, body in PYTHON if "snippet" in words]
SNIPPET_RUNNER = ROOT / "tests" / "_snippet.py"
HARNESSED = [
    pytest.param(
        where,
        body,
        id=where,
        marks=[pytest.mark.postgres]
        if _doc_harness.HARNESS[first_line(where, body)].postgres
        else [],
    )
    for where, _, body in PYTHON
    if first_line(where, body) in _doc_harness.HARNESS
]

# Blocks that another test runs, by page and first line.
RUN_ELSEWHERE = {
    ("README.md", "import asyncio"): "test_readme.py, test_first_hour.py (the Quick start)",
    ("docs/cli.md", "from cairnq import Worker"): "test_first_hour.py (app/tasks.py)",
    ("docs/store.md", "import asyncio"): "test_readme.py (the store layer example)",
    ("docs/store.md", "store = cq.store"): "test_readme.py (a replaced store method)",
    (
        "docs/postgres.md",
        'executor = create_pool_executor("postgresql://app@db/app", max_size=20, schema="jobs")',
    ): "test_pg_executor.py",
    ("docs/writing-an-extension.md", "# audit_ext/__init__.py"): "test_extension_guide.py",
    (
        "docs/writing-an-extension.md",
        "cq = CairnQ(url, extensions=[Audit()])",
    ): "test_extension_guide.py",
    ("docs/writing-an-extension.md", "# audit_ext/_cli.py"): "test_extension_guide.py",
    ("docs/writing-an-extension.md", "# audit_ext/_pages.py"): "test_extension_guide.py",
}
# Blocks that only compile, each with the reason no test can run it (none is listed).
COMPILED_ONLY: dict[tuple[str, str], str] = {}


@pytest.mark.slow
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    config, site = str(ROOT / "mkdocs.yml"), str(tmp_path / "site")
    command = ["mkdocs", "build", "--strict", "--quiet", "-f", config, "-d", site]
    built = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "index.html").is_file()
    assert [page for page in pages()[1:] if not renders_whole(page, tmp_path / "site")] == []


def renders_whole(page: Path, site: Path) -> bool:
    """Whether the built ``page`` has every section heading and code block of its source
    (a fence the site's Markdown cannot read swallows what follows it)."""
    name = page.relative_to(ROOT / "docs").with_suffix("").as_posix()
    if name == "api":
        return True  # generated from the docstrings
    html = (site / ("" if name == "index" else name) / "index.html").read_text()
    text = page.read_text(encoding="utf-8")
    fenced, headings, fences = False, 0, 0
    for line in text.splitlines():
        if re.match(r"^\s*```(?!`)", line):
            fenced = not fenced
            fences += fenced
        elif not fenced and line.startswith("## "):
            headings += 1
    included = "--8<--" in text  # a page that includes a part of another adds its blocks
    blocks_ok = html.count("<pre") >= fences if included else html.count("<pre") == fences
    return html.count("<h2 id=") == headings and blocks_ok


@pytest.mark.parametrize(("where", "words", "body"), PYTHON, ids=[b[0] for b in PYTHON])
def test_every_python_block_compiles(where: str, words: list[str], body: str) -> None:
    compile(body, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


def test_the_coming_from_pages_each_run_a_cairnq_program() -> None:
    folder = ROOT / "docs" / "coming-from"
    without = [
        p.name
        for p in sorted(folder.glob("*.md"))
        if p.name != "reference-sdk.md" and "```python exec" not in p.read_text()
    ]
    assert without == []


@pytest.mark.slow
@pytest.mark.parametrize(("where", "body"), PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_every_complete_program_runs_as_written(where: str, body: str, tmp_path: Path) -> None:
    (tmp_path / "example.py").write_text(body)
    env = {k: v for k, v in os.environ.items() if k != "CAIRNQ_DATABASE_URL"}
    ran = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, f"{where}\n{ran.stdout[-3000:]}{ran.stderr[-3000:]}"


def test_every_link_of_the_readme_names_a_file_of_the_repository() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links no page of the site"
    assert [t for t in local if not (ROOT / t).is_file()] == []


def test_the_readme_links_every_feature_page_of_the_site() -> None:
    import yaml

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    [features] = [entry["Features"] for entry in nav if "Features" in entry]
    pages = [page for entry in features for page in entry.values()]
    assert [p for p in pages if f"(docs/{p})" not in text and p != "durations.md"] == []


def test_every_python_block_is_run_or_says_why_not() -> None:
    unaccounted = [
        where
        for where, words, body in PYTHON
        if not {"exec", "snippet", "foreign"} & set(words)
        and not any(w.startswith("file=") for w in words)
        and first_line(where, body) not in RUN_ELSEWHERE
        and first_line(where, body) not in COMPILED_ONLY
        and first_line(where, body) not in _doc_harness.HARNESS
    ]
    assert unaccounted == []


def test_the_ledgers_name_blocks_that_exist() -> None:
    blocks_now = {first_line(where, body) for where, _, body in PYTHON}
    assert set(RUN_ELSEWHERE) - blocks_now == set()
    assert set(COMPILED_ONLY) - blocks_now == set()
    assert set(_doc_harness.HARNESS) - blocks_now == set()
    assert set(_doc_harness.HARNESS) & (set(COMPILED_ONLY) | set(RUN_ELSEWHERE)) == set()


@pytest.mark.slow
@pytest.mark.parametrize(("where", "body"), SNIPPETS, ids=[s[0] for s in SNIPPETS])
def test_every_snippet_runs_beside_a_client_and_a_worker(
    where: str, body: str, tmp_path: Path
) -> None:
    (tmp_path / "snippet.py").write_text(body)
    env = {k: v for k, v in os.environ.items() if k != "CAIRNQ_DATABASE_URL"}
    ran = subprocess.run(
        [sys.executable, str(SNIPPET_RUNNER), "snippet.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, f"{where}\n{ran.stdout[-3000:]}{ran.stderr[-3000:]}"


@pytest.mark.parametrize(("where", "body"), HARNESSED)
async def test_every_block_with_a_harness_runs_and_does_what_its_page_says(
    where: str,
    body: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    harness = _doc_harness.HARNESS[first_line(where, body)]
    for package in harness.imports:
        pytest.importorskip(package)
    monkeypatch.chdir(tmp_path)
    for name in ("CAIRNQ_DATABASE_URL", *harness.env):
        # Set first, so the undo removes what the harness sets where nothing was before.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    (tmp_path / "snippet.py").write_text(body)
    if not harness.postgres:
        await _snippet.run("snippet.py", harness.text, ROOT=ROOT)
        return
    dsn, schema = request.getfixturevalue("pg_dsn"), f"doc_{secrets.token_hex(5)}"
    try:
        await _snippet.run("snippet.py", harness.text, ROOT=ROOT, DSN=dsn, SCHEMA=schema)
    finally:
        drop_schema(dsn, schema)
