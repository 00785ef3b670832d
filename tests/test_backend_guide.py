"""The "adding a backend" guide names only things that exist.

Every span in code quotes in ``docs/adding-a-backend.md`` that looks like a
reference must resolve: a dotted ``cairnq.`` name imports, a path or glob
(``<dialect>`` standing for each dialect) matches files, and a bare name is a
test or fixture of the driver suite, a member of ``Backend`` or ``Driver``, or
a marker or extra in ``pyproject.toml``; ``from cairnq... import name`` imports.
Other spans with spaces or punctuation are
literal text (SQL, a command line) and are not checked.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Collection, Iterator
from pathlib import Path

import cairnq.drivertest as suite
from cairnq.backends.base import Backend
from cairnq.drivertest import Driver
from cairnq.protocol.statements import DIALECTS

ROOT = Path(__file__).parents[1]
GUIDE = ROOT / "docs" / "adding-a-backend.md"

_SPAN = re.compile(r"`([^`\n]+)`")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_DOTTED = re.compile(r"cairnq(\.[A-Za-z_]\w*)+")
_IMPORT = re.compile(r"from (cairnq[\w.]*) import (\*|\w+)")
_PATH = re.compile(r"[\w.<>*-]+(/[\w.<>*-]*)+|[\w-]+\.(py|toml|md|sql|json)")


def code_spans(text: str) -> Iterator[str]:
    for match in _SPAN.finditer(text):
        yield match.group(1)


def imports(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


def path_exists(pattern: str) -> bool:
    if "<dialect>" in pattern:
        return all(path_exists(pattern.replace("<dialect>", d)) for d in DIALECTS)
    if pattern.endswith("/"):
        return (ROOT / pattern).is_dir()
    return any(ROOT.glob(pattern))


def suite_fixtures() -> set[str]:
    """Every argument the suite's tests take that no parametrize mark supplies."""
    names: set[str] = set()
    for test in (getattr(suite, n) for n in suite.__all__ if n.startswith("test_")):
        supplied = {
            arg.strip()
            for mark in getattr(test, "pytestmark", [])
            if mark.name == "parametrize"
            for arg in str(mark.args[0]).split(",")
        }
        names |= set(inspect.signature(test).parameters) - supplied
    return names


def defined_fixtures() -> set[str]:
    """Fixtures the test tree defines (``tests/conftest.py``, ``tests/test_driver_suite.py``)."""
    found: set[str] = set()
    for file in ("conftest.py", "test_driver_suite.py"):
        text = (ROOT / "tests" / file).read_text()
        found |= set(re.findall(r"@pytest\.fixture[^\n]*\n(?:@[^\n]*\n)*def (\w+)", text))
    return found


def bare_names() -> set[str]:
    pyproject = (ROOT / "pyproject.toml").read_text()
    markers = set(re.findall(r'^\s*"(\w+):', pyproject, re.MULTILINE))
    extras = set(re.findall(r"^(\w+) = \[", pyproject, re.MULTILINE))
    members = {
        name
        for protocol in (Backend, Driver)
        for name in set(vars(protocol)) | set(protocol.__annotations__)
        if not name.startswith("_")
    }
    tests = {n for n in suite.__all__ if n.startswith("test_")}
    fixtures = suite_fixtures() | defined_fixtures()
    return tests | fixtures | members | markers | extras


def unresolved(text: str, allowed: Collection[str] = ()) -> list[str]:
    """The references in ``text``'s code spans that name nothing (``allowed`` aside)."""
    known = bare_names()
    missing = []
    for span in code_spans(text):
        if span in allowed:
            continue
        if match := _IMPORT.fullmatch(span):
            module, name = match.groups()
            ok = imports(module if name == "*" else f"{module}.{name}")
        elif _DOTTED.fullmatch(span):
            ok = imports(span)
        elif _PATH.fullmatch(span):
            ok = path_exists(span)
        elif _IDENTIFIER.fullmatch(span):
            ok = span in known
        else:
            continue  # literal text: SQL, a command, a parameter style
        if not ok:
            missing.append(span)
    return missing


def test_every_name_the_guide_uses_exists() -> None:
    assert unresolved(GUIDE.read_text()) == []


def test_the_check_reports_names_that_do_not_exist() -> None:
    text = (
        "Implement `cairnq.backends.base.Backend` and `cairnq.backends.base.NoSuchRunner`, "
        "write `src/cairnq/protocol/sql/<dialect>/no_such_*.sql` next to "
        "`src/cairnq/protocol/sql/<dialect>/*.sql`, take the `driver` fixture and the "
        "`no_such_fixture` one, and run `test_scenario_passes` and `test_no_such_thing`."
    )
    assert unresolved(text) == [
        "cairnq.backends.base.NoSuchRunner",
        "src/cairnq/protocol/sql/<dialect>/no_such_*.sql",
        "no_such_fixture",
        "test_no_such_thing",
    ]


def test_a_glob_must_match_for_every_dialect() -> None:
    assert unresolved("`src/cairnq/kernel/sql/<dialect>/claim_tokens.sql`") == [
        "src/cairnq/kernel/sql/<dialect>/claim_tokens.sql"
    ]


def test_the_guide_is_one_page_of_numbered_steps() -> None:
    text = GUIDE.read_text()
    steps = [int(n) for n in re.findall(r"^(\d+)\. \*\*", text, re.MULTILINE)]
    assert steps == list(range(1, len(steps) + 1))
    assert len(steps) >= 5
    assert len(text.splitlines()) <= 120
