"""No hand-written module of the package grows past 800 lines.

A module that long holds more than one thing. Generated modules (they say so in
their first line) are left out: their source is counted instead. The modules over
the bound today are listed with their length, a ceiling: they may shrink, never
grow, and leave the list once under the bound.
"""

from __future__ import annotations

from pathlib import Path

import cairnq

SRC = Path(cairnq.__file__).parent
BOUND = 800
GENERATED_MARK = "# generated from "

# module -> its length today, a ceiling until it is split.
OVER: dict[str, int] = {}


def lengths() -> dict[str, int]:
    """The line count of every hand-written module of the package."""
    found: dict[str, int] = {}
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if text.startswith(GENERATED_MARK):
            continue
        found[path.relative_to(SRC).as_posix()] = text.count("\n")
    return found


def too_long(found: dict[str, int], over: dict[str, int]) -> dict[str, str]:
    """What breaks the rule: a module past the bound and its ceiling, or a listed one
    that is gone or back under the bound (its entry must go)."""
    wrong: dict[str, str] = {}
    for module, length in found.items():
        ceiling = max(BOUND, over.get(module, BOUND))
        if length > ceiling:
            wrong[module] = f"{length} lines, more than {ceiling}"
    for module in over:
        if found.get(module, 0) <= BOUND:
            wrong[module] = "no longer over the bound: remove it from OVER"
    return wrong


def test_no_hand_written_module_is_longer_than_800_lines_beyond_the_listed_ceilings() -> None:
    assert too_long(lengths(), OVER) == {}


def test_the_rule_reports_a_long_module_a_grown_one_and_a_stale_entry() -> None:
    found = {"a.py": 801, "b.py": 950, "c.py": 700}
    assert too_long(found, {"b.py": 900, "c.py": 820}) == {
        "a.py": "801 lines, more than 800",
        "b.py": "950 lines, more than 900",
        "c.py": "no longer over the bound: remove it from OVER",
    }


def test_generated_modules_are_left_out_and_their_sources_counted() -> None:
    found = lengths()
    assert "client/_sync.py" not in found
    assert "client/_async.py" in found
    assert "backends/_pg_sync.py" not in found
    assert "backends/_pg_async.py" in found
