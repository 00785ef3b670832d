"""The documentation site builds in strict mode, and its examples and the README's run.

``mkdocs build --strict`` fails on a broken link or anchor, a page left out of
``mkdocs.yml``'s nav, or a docstring the API reference cannot read. Every
```` ```python ```` block of the README and of ``docs/`` compiles (top-level
``await`` allowed: the snippets that run inside an ``async def`` say so), and a
block marked ```` ```python exec ```` is a complete program that runs, as
written, in a fresh directory. Blocks marked ``foreign`` show another library's
code (the "Coming from ..." pages); they compile, and are not run here.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


PYTHON = blocks("python")
PROGRAMS = [(where, body) for where, words, body in PYTHON if "exec" in words]


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
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "api" / "index.html").is_file()


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
