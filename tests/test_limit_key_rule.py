"""The limit key rule is spelled the same in every statement that reads it in SQL.

``limits.key_text`` is the one key rule; the statements that compute a key from a
task's JSON (the candidate and page statements, the running counts, the fair share's
claim and index) each spell it in SQL. These tests hold every spelling to one text per
dialect, so a change to the rule cannot leave a copy behind: a task would then be
admitted under one key and counted under another.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import cairnq.extensions.limits as limits_package

STATEMENTS = Path(limits_package.__file__).parent / "sql"

# The rule's parts, as limits_running_by_path spells them (comments and whitespace aside).
RULE = {
    "postgres": (
        "case jsonb_typeof(found.value) when 'string' then nullif(found.value #>> '{}', '') "
        "when 'number' then case when found.value::text ~ '^-?[0-9]+$' "
        "then found.value::text end end",
        "jsonb_path_query_first( case when :key_root::text = 'metadata' then metadata "
        "else payload end, ('strict ' || :key_path::text)::jsonpath, '{}'::jsonb, true )",
    ),
    "sqlite": (
        "when 'text' then nullif(json_extract(found.doc, :key_path), '') "
        "when 'integer' then ( select case when digits = '-0' then '0' else digits end "
        "from ( select substr(pair, 2, instr(pair, ',') - 2) as digits "
        "from (select json_extract(found.doc, :key_path, :key_path) as pair) ) )",
        "case when :key_root = 'metadata' then metadata else payload end as doc",
    ),
}
# What marks a statement as computing a key from JSON.
MARKER = {"postgres": "jsonb_path_query_first(", "sqlite": "json_type(found.doc"}


# Names a statement may read the rule's inputs by: the task's alias (or the trigger's
# new row), and the fair share's stored path and root in the insert trigger.
ALIASES = {
    "t.metadata": "metadata",
    "t.payload": "payload",
    "new.metadata": "metadata",
    "new.payload": "payload",
    "found.path": ":key_path",
    "s.key_root": ":key_root",
}


def _text(path: Path) -> str:
    """The statement without its comments, its inputs by one name each, each whitespace
    run one space."""
    lines = [line.split("--", 1)[0] for line in path.read_text().splitlines()]
    text = re.sub(r"\s+", " ", " ".join(lines))
    for alias, name in ALIASES.items():
        text = text.replace(alias, name)
    return text


def _readers(dialect: str) -> list[Path]:
    return sorted(p for p in (STATEMENTS / dialect).glob("*.sql") if MARKER[dialect] in _text(p))


@pytest.mark.parametrize("dialect", sorted(RULE))
def test_every_statement_reading_a_limit_key_spells_the_rule_the_same_way(dialect: str) -> None:
    """Each copy of the rule (one per use of the JSON path function) is the same text."""
    differing = [
        path.name
        for path in _readers(dialect)
        for part in RULE[dialect]
        if _text(path).count(part) != _text(path).count(MARKER[dialect])
    ]
    assert differing == []


@pytest.mark.parametrize("dialect", sorted(RULE))
def test_the_running_counts_and_the_pages_all_read_the_key_in_sql(dialect: str) -> None:
    """The statements that must agree on a key are among those the rule test reads."""
    names = {p.name for p in _readers(dialect)}
    page = "limits_claim_keyed.sql" if dialect == "postgres" else "limits_admit_keyed.sql"
    fair = "limits_fair_claim.sql" if dialect == "postgres" else "limits_fair_admit.sql"
    expected = {page, fair, "limits_running_by_path.sql", "limits_candidates.sql"}
    assert expected <= names
