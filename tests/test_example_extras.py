"""Each example that needs more than cairnq's core runs with only what it says it needs.

A block of the README or the site marked ``needs=A,B`` (``A`` an extra of cairnq,
such as ``cron``, or another package, such as ``httpx``) runs here in a fresh
virtual environment holding cairnq with those extras and packages and nothing
else, installed with ``pip install --no-index`` from wheels this test rebuilds
out of the test environment (``tests/_wheelhouse.py``), so no network is used:

- ```` ```python exec needs=... ````: the program runs as written;
- ```` ```python snippet needs=... ````: the snippet runs as ``tests/_snippet.py``
  runs it;
- ```` ```sh needs=... ````: its ``cairnq`` commands run in order on a migrated
  database in a fresh directory;
- ```` ```sh run needs=... ````: the page's whole example runs as
  ``tests/test_docs.py`` runs it.

An example that needs something it does not name fails here with the import
error that a reader would meet.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from . import _wheelhouse, test_docs, test_site

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = set(importlib.metadata.metadata("cairnq").get_all("Provides-Extra") or [])

pytestmark = pytest.mark.slow


def requirements(needs: list[str]) -> list[str]:
    """What ``needs=`` names, as pip requirements: an extra of cairnq or a package."""
    extras = sorted(n for n in needs if n in EXTRAS)
    others = [n for n in needs if n not in EXTRAS]
    return [f"cairnq[{','.join(extras)}]" if extras else "cairnq", *others]


def examples() -> list[tuple[str, str, list[str], str]]:
    """(where, kind, needs, body) of every block that names what it needs."""
    found = []
    for language in ("python", "sh"):
        for where, words, body in test_site.blocks(language):
            needs = test_docs.needs_of(words)
            if not needs:
                continue
            if language == "python":
                assert {"exec", "snippet"} & set(words), f"{where}: a block that runs names needs"
                kind = "program" if "exec" in words else "snippet"
            else:
                kind = "page" if "run" in words else "commands"
            found.append((where, kind, needs, body))
    return found


EXAMPLES = examples()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    wanted = sorted({r for _, _, needs, _ in EXAMPLES for r in requirements(needs)})
    _wheelhouse.build(folder, wanted)
    return folder


@pytest.fixture(scope="module")
def environments(
    wheels: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[list[str]], Path]:
    """The python of a virtual environment holding only cairnq and ``needs``, one per
    set of needs (examples that need the same share it)."""
    made: dict[tuple[str, ...], Path] = {}

    def environment(needs: list[str]) -> Path:
        key = tuple(sorted(needs))
        if key not in made:
            made[key] = environment_with(needs, wheels, tmp_path_factory.mktemp("venv"))
        return made[key]

    return environment


def environment_with(needs: list[str], wheels: Path, folder: Path) -> Path:
    """A virtual environment holding only cairnq and ``needs``; its python."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = ["pip", "--python", str(python), "install", "--quiet", "--no-index"]
    installed = subprocess.run(
        [sys.executable, "-m", *pip, "--find-links", str(wheels), *requirements(needs)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return python


def test_the_examples_that_need_extras_say_so() -> None:
    named = {where.split(":")[0]: needs for where, _, needs, _ in EXAMPLES}
    assert named["docs/cli.md"] == ["cron"]
    assert named["docs/metrics.md"] == ["metrics", "otel"]
    assert "httpx" in named["docs/fastapi.md"]
    assert "cron" in named["docs/schedules.md"]


@pytest.mark.parametrize(("where", "kind", "needs", "body"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_the_example_runs_with_only_what_it_names_installed(
    where: str,
    kind: str,
    needs: list[str],
    body: str,
    environments: Callable[[list[str]], Path],
    tmp_path: Path,
) -> None:
    python = environments(needs)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CAIRNQ_DATABASE_URL"}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    if kind == "page":
        test_docs.run_example(where.split(":")[0].removeprefix("docs/"), work, str(python))
        return
    if kind == "program":
        (work / "example.py").write_text(body)
        command = [str(python), "example.py"]
    elif kind == "snippet":
        (work / "snippet.py").write_text(body)
        command = [str(python), str(test_site.SNIPPET_RUNNER), "snippet.py"]
    else:
        (work / "example.sh").write_text("set -e\ncairnq migrate\n" + body)
        command = ["bash", "example.sh"]
    ran = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, f"{where}\n{ran.stdout[-3000:]}{ran.stderr[-3000:]}"
