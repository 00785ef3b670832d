"""Renders the soak table of docs/guarantees.md from the committed summaries (``docs/soak/*.json``).

Run from the repository root::

    python -m tests.chaos.soak_table           # print the section
    python -m tests.chaos.soak_table --write   # rewrite it in docs/guarantees.md
    python -m tests.chaos.soak_table --check   # exit 1 when docs/guarantees.md differs

The section sits between ``BEGIN`` and ``END`` below; everything in it comes
from the summaries ``python -m tests.chaos.soak`` writes, so the page states
the minutes, seed and commit of the runs it shows.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guarantees.md"  # the page the table renders into
SUMMARIES = ROOT / "docs" / "soak"
BACKENDS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
BEGIN = "<!-- soak-table: python -m tests.chaos.soak_table --write renders this from docs/soak -->"
END = "<!-- /soak-table -->"


class SectionMissing(Exception):
    """docs/guarantees.md has no soak-table markers (or they are out of order)."""


def load(folder: Path = SUMMARIES) -> dict[str, dict[str, Any]]:
    """The summaries in ``folder``, by backend, in the table's column order."""
    found = {}
    for backend in BACKENDS:
        path = folder / f"{backend}.json"
        if path.exists():
            found[backend] = json.loads(path.read_text())
    return found


def _n(value: int) -> str:
    return f"{value:,}"


def _s(value: float) -> str:
    return f"{value:g}"


def _span(bounds: list[float]) -> str:
    return f"{_s(bounds[0])}-{_s(bounds[1])} s"


def _minutes(value: float) -> str:
    return f"{_s(value)} minute" + ("" if value == 1 else "s")


def _commit(summary: dict[str, Any]) -> str:
    commit = summary["commit"]
    sha = (commit.get("sha") or "unknown")[:7]
    return f"commit {sha}" + (" with uncommitted changes" if commit.get("dirty") else "")


def _machine(machine: dict[str, Any]) -> str:
    return (
        f"{machine['cpus']} CPUs ({machine['cpu']}), {_s(machine['memory_gib'])} GiB, "
        f"{machine['os']}, {machine['python']}, SQLite {machine['sqlite']}, "
        f"PostgreSQL {machine['postgresql']}"
    )


def _runs(summaries: dict[str, dict[str, Any]]) -> str:
    """Minutes, seed, commit and machine: once when every run shares them, else per run."""
    runs = list(summaries.values())
    first = runs[0]
    shared = all(
        (r["minutes"], r["seed"], r["commit"], r["machine"])
        == (first["minutes"], first["seed"], first["commit"], first["machine"])
        for r in runs
    )
    if shared:
        per = " per backend" if len(runs) > 1 else f" on {BACKENDS[first['backend']]}"
        return (
            f"{_minutes(first['minutes'])}{per}, seed {first['seed']}, {_commit(first)}, "
            f"on {_machine(first['machine'])}"
        )
    return "; ".join(
        f"{BACKENDS[backend]}: {_minutes(r['minutes'])}, seed {r['seed']}, {_commit(r)}, "
        f"on {_machine(r['machine'])}"
        for backend, r in summaries.items()
    )


def _verdict(summaries: dict[str, dict[str, Any]]) -> str:
    counts = {backend: r["checker"]["violation_count"] for backend, r in summaries.items()}
    if not any(counts.values()):
        where = "on both" if len(counts) > 1 else "on it"
        return f"with the checker reporting **0 violations** {where}"
    parts = [f"**{_n(n)}** on {BACKENDS[backend]}" for backend, n in counts.items()]
    return (
        "with the checker reporting violations: "
        + " and ".join(parts)
        + " (listed in `docs/soak/<backend>.json`)"
    )


def _faults(summary: dict[str, Any]) -> str:
    faults, config = summary["faults"], summary["config"]
    kinds = faults["by_kind"]
    drawn = sum(faults["chosen_by_kind"].values())
    parts = [
        f"{_n(kinds['kill'])} kill -9",
        f"{_n(kinds['pause'])} SIGSTOP ({_span(config['pause_s'])})",
    ]
    if "lock" in kinds:
        parts.append(
            f"{_n(kinds['lock'])} foreign write locks ({_span(config['lock_s'])}, past the "
            f"{_s(config['busy_ms'] / 1000)} s busy budget)"
        )
    if "sessions" in kinds:
        parts.append(
            f"{_n(kinds['sessions'])} session terminations "
            f"({_n(faults['sessions_terminated'])} sessions)"
        )
    if "crash" in kinds:
        parts.append(
            f"{_n(kinds['crash'])} server crashes (`pg_ctl stop -m immediate`), each down "
            f"{_span(config['crash_down_s'])} before the restart"
        )
    return f"{_n(faults['took_effect'])} of {_n(drawn)} drawn: " + ", ".join(parts)


def _typed(summary: dict[str, Any]) -> str:
    failed = summary["submits_failed_typed"]
    stored = failed["found_stored"]
    return _n(failed["count"]) + (f", {_n(stored)} of them stored" if stored else ", none stored")


def _duplicates(summary: dict[str, Any]) -> str:
    d = summary["duplicates"]
    if not d["count"]:
        return "0"
    median, longest = d["window_s_median"], d["window_s_max"]
    return f"{_n(d['count'])}; window median {median:.1f} s, max {longest:.1f} s"


def _overlaps(summary: dict[str, Any]) -> str:
    o = summary["overlapping_runs"]
    if not o["count"]:
        return "0"
    return f"{_n(o['count'])}, overlap at most {o['overlap_s_max']:.1f} s"


def _final(summary: dict[str, Any]) -> str:
    outcomes = summary["outcomes"]
    order = ["succeeded", "failed", "canceled"]
    order += sorted(s for s in outcomes if s not in order)
    parts = [f"{_n(outcomes[s])} {s}" for s in order if outcomes.get(s)]
    quiescence = summary["quiescence"]
    if quiescence["all_terminal"]:
        parts.append("nothing left running")
    else:
        parts.append(f"**{_n(quiescence['stuck_count'])} never finished**")
    if summary.get("purged"):
        parts.append(f"{_n(summary['purged'])} purged once finished")
    return ", ".join(parts)


def _keys(summary: dict[str, Any]) -> str:
    return f"{_n(summary.get('key_conflicts', 0))} refused, {_n(summary.get('retried', 0))} retried"


def _features(s: dict[str, Any]) -> str:
    """What the soak's work reached beyond single tasks (empty for older summaries)."""
    flows = s.get("workflows")
    if flows is None:
        return "-"
    decided = flows["parked_decisions"]
    return (
        f"{_n(flows['dependents'])} dependents; parked tasks (dependents and gathering "
        f"parents) {_n(decided.get('released', 0))} times released, "
        f"{_n(decided.get('failed', 0))} failed and {_n(decided.get('canceled', 0))} "
        f"canceled (by policy or by hand), {_n(flows.get('released_past_a_purge', 0))} "
        f"releases after a dependency that succeeded was purged; {_n(flows['gathers'])} "
        f"gathers; "
        f"{_n(s['schedule_slots'])} schedule slots; {_n(s['limited_runs'])} runs under a "
        f"limit of {s['config']['limit']['running_per_customer']} per key"
    )


ROWS = [
    ("tasks", lambda s: _n(s["tasks"])),
    ("faults that took effect on a live process", _faults),
    ("submits that failed with a typed error", _typed),
    ("settlements refused as stale (`LostLease`)", lambda s: _n(s["refused_settlements"])),
    ("leases recovered after expiry", lambda s: _n(s["leases_recovered"])),
    ("tasks run again after an unsettled run (duplicates)", _duplicates),
    ("of which ran at the same time as the previous run", _overlaps),
    ("keyed submits refused by `reject` / canceled keyed tasks retried", _keys),
    ("how each task ended", _final),
    ("workflows, schedules and limits in the mix", _features),
]


def render(summaries: dict[str, dict[str, Any]]) -> str:
    """The page's section (markers included) for ``summaries``."""
    if not summaries:
        raise ValueError(f"no soak summaries in {SUMMARIES}; run python -m tests.chaos.soak")
    names = [BACKENDS[backend] for backend in summaries]
    leases = sorted({_s(s["config"]["lease_ms"] / 1000) for s in summaries.values()})
    lines = [
        BEGIN,
        _wrap(f"The last soak ({_runs(summaries)}), {_verdict(summaries)}:"),
        "",
        "| | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for label, cell in ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(s) for s in summaries.values()) + " |")
    lines += [
        "",
        _wrap(
            f"The duplicate window is the lease ({' and '.join(leases)} s in the soak) plus "
            "the time to notice and reclaim; the overlaps are workers that lost their lease "
            "(frozen by SIGSTOP, or cut off from the database by a lock, a crash or a "
            "terminated session) while their handlers ran on "
            "after another worker had taken the task over: the fence refuses such a "
            "settlement."
        ),
        END,
    ]
    return "\n".join(lines)


def _wrap(prose: str) -> str:
    return textwrap.fill(prose, width=80, break_long_words=False, break_on_hyphens=False)


def _bounds(text: str) -> tuple[int, int]:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SectionMissing(f"docs/guarantees.md has no soak-table section ({BEGIN} ... {END})")
    return start, end + len(END)


def current(text: str) -> str:
    """The soak section of page text ``text``, markers included."""
    start, end = _bounds(text)
    return text[start:end]


def replaced(text: str, section: str) -> str:
    """Page text ``text`` with its soak section replaced by ``section``."""
    start, end = _bounds(text)
    return text[:start] + section + text[end:]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--write", action="store_true", help="rewrite the section in docs/guarantees.md"
    )
    mode.add_argument("--check", action="store_true", help="exit 1 when docs/guarantees.md differs")
    args = parser.parse_args()
    section = render(load())
    text = PAGE.read_text()
    if args.write:
        PAGE.write_text(replaced(text, section))
    elif args.check:
        if current(text) != section:
            print("docs/guarantees.md's soak table differs from docs/soak/*.json; run with --write")
            return 1
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
