"""The Guarantees page's soak table is what the committed soak summaries render, and says
what they are."""

from __future__ import annotations

import copy
from typing import Any

from . import soak_table


def _summary(backend: str, **changes: Any) -> dict[str, Any]:
    """A soak summary as ``tests.chaos.soak`` writes it, with ``changes`` applied."""
    kinds = (
        ["kill", "pause", "lock"] if backend == "sqlite" else ["kill", "pause", "sessions", "crash"]
    )
    summary: dict[str, Any] = {
        "commit": {"sha": "0123456789abcdef", "dirty": False, "changed": []},
        "backend": backend,
        "seed": 7,
        "minutes": 2.0,
        "machine": {
            "cpu": "AMD EPYC",
            "cpus": 2,
            "memory_gib": 23.5,
            "os": "Debian GNU/Linux 12 (bookworm), kernel 6.1",
            "python": "CPython 3.11.7",
            "sqlite": "3.40.1",
            "postgresql": "15.20",
        },
        "config": {
            "lease_ms": 1500,
            "busy_ms": 1000,
            "pause_s": [0.5, 3.0],
            "lock_s": [0.5, 2.5],
            "crash_down_s": [1.0, 3.0],
        },
        "faults": {
            "took_effect": 3 * len(kinds),
            "by_kind": dict.fromkeys(kinds, 3),
            "chosen_by_kind": dict.fromkeys(kinds, 4),
            "sessions_terminated": 9,
        },
        "tasks": 1234,
        "outcomes": {"succeeded": 1000, "failed": 34, "canceled": 200},
        "submits_failed_typed": {"count": 5, "found_stored": 0, "by_error": {}},
        "refused_settlements": 6,
        "leases_recovered": 7,
        "duplicates": {"count": 8, "window_s_median": 1.84, "window_s_max": 3.66},
        "overlapping_runs": {"count": 2, "overlap_s_max": 2.51},
        "quiescence": {"quiescent": True, "all_terminal": True, "stuck": [], "stuck_count": 0},
        "checker": {"valid": True, "counters": {}, "violation_count": 0, "violations": []},
    }
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        target = summary
        for key in parents:
            target = target[key]
        target[leaf] = copy.deepcopy(value)
    return summary


def _rendered(summaries: dict[str, dict[str, Any]]) -> str:
    """The rendered section with its line breaks undone (prose is wrapped at 80 columns)."""
    return " ".join(soak_table.render(summaries).split())


def test_the_guarantees_page_soak_table_is_what_the_committed_summaries_render() -> None:
    summaries = soak_table.load()
    assert set(summaries) == {"sqlite", "postgres"}, (
        "commit docs/soak/sqlite.json and postgres.json"
    )
    page = soak_table.PAGE.read_text()
    assert soak_table.current(page) == soak_table.render(summaries), (
        "docs/guarantees.md's soak table is stale: python -m tests.chaos.soak_table --write"
    )


def test_the_soak_sentence_names_the_minutes_seed_and_commit_the_runs_share() -> None:
    text = _rendered({"sqlite": _summary("sqlite"), "postgres": _summary("postgres")})
    assert "(2 minutes per backend, seed 7, commit 0123456, on 2 CPUs (AMD EPYC)" in text
    assert "**0 violations** on both" in text


def test_runs_that_differ_are_each_named_and_a_dirty_tree_is_said() -> None:
    text = _rendered(
        {
            "sqlite": _summary("sqlite"),
            "postgres": _summary("postgres", seed=8, minutes=10, commit__dirty=True),
        }
    )
    assert "SQLite: 2 minutes, seed 7, commit 0123456, on" in text
    assert "PostgreSQL: 10 minutes, seed 8, commit 0123456 with uncommitted changes, on" in text


def test_violations_and_unfinished_tasks_are_not_rendered_as_a_clean_run() -> None:
    stuck = {"all_terminal": False, "quiescent": False, "stuck": [{}], "stuck_count": 3}
    text = _rendered(
        {
            "sqlite": _summary("sqlite", checker__violation_count=2, quiescence=stuck),
            "postgres": _summary("postgres"),
        }
    )
    assert "0 violations" not in text
    assert "**2** on SQLite and **0** on PostgreSQL" in text
    assert "**3 never finished**" in text


def test_the_table_counts_only_faults_that_took_effect_out_of_those_drawn() -> None:
    text = _rendered({"postgres": _summary("postgres")})
    assert (
        "12 of 16 drawn: 3 kill -9, 3 SIGSTOP (0.5-3 s), 3 session terminations (9 sessions)"
        in text
    )


def test_writing_the_section_replaces_only_the_section() -> None:
    section = soak_table.render({"sqlite": _summary("sqlite")})
    page = f"before\n{soak_table.BEGIN}\nold table\n{soak_table.END}\nafter\n"
    assert soak_table.replaced(page, section) == f"before\n{section}\nafter\n"
