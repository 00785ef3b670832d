"""The limit key rule is spelled the same in every statement that reads it in SQL.

``limits.key_text`` is the one key rule; the statements that compute a key from a
task's JSON (the candidate and page statements, the running counts, the fair share's
claim and index) each spell it in SQL. These tests hold every spelling to one text per
dialect, so a change to the rule cannot leave a copy behind: a task would then be
admitted under one key and counted under another.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

import cairnq.extensions.limits as limits_package

STATEMENTS = Path(limits_package.__file__).parent / "sql"

# SQLite's rule reads the task's JSON by this expression each time (no per-row subquery).
_DOC = "iif(:key_root = 'metadata', metadata, payload)"

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
        f"case json_type({_DOC}, :key_path) "
        f"when 'text' then nullif(json_extract({_DOC}, :key_path), '') "
        f"when 'integer' then case when typeof(json_extract({_DOC}, :key_path)) = 'integer' "
        f"then cast(json_extract({_DOC}, :key_path) as text) "
        f"else substr( json_extract({_DOC}, :key_path, :key_path), 2, "
        f"instr(json_extract({_DOC}, :key_path, :key_path), ',') - 2 ) end end",
    ),
}
# What marks a statement as computing a key from JSON.
MARKER = {"postgres": "jsonb_path_query_first(", "sqlite": "json_type(iif("}


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


# The rule as the fair share's insert trigger spells it: the trigger is x0022's text (held
# to it by test_fair_share.py), written before the rule lost its per-row subqueries.
TRIGGER_RULE = (
    "case json_type(found.doc, :key_path) "
    "when 'text' then nullif(json_extract(found.doc, :key_path), '') "
    "when 'integer' then ( select case when digits = '-0' then '0' else digits end "
    "from ( select substr(pair, 2, instr(pair, ',') - 2) as digits "
    "from (select json_extract(found.doc, :key_path, :key_path) as pair) ) ) end"
)


def test_only_the_insert_trigger_spells_the_sqlite_rule_as_its_migration_did() -> None:
    """Every other SQLite statement that reads a key from JSON is a reader of the rule
    test above; the trigger, whose text its migration fixed, holds the older spelling."""
    typed = {p.name for p in (STATEMENTS / "sqlite").glob("*.sql") if "json_type(" in _text(p)}
    older = {p.name for p in (STATEMENTS / "sqlite").glob("*.sql") if TRIGGER_RULE in _text(p)}
    assert older == {"limits_fair_arm.sql"}
    assert typed - older == {p.name for p in _readers("sqlite")}


KEY_VALUES = [
    "x", "", " 7", "7", "007", "-0", "1e3", "\u00e9", "e\u0301", "\U0001f600", 'a"b\\c', "it's",
    0, 7, -7, 2**53, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**70, -(2**70),
    7.0, 1000.0, 1.5, -0.5, True, False, None, [1], {"a": 1},
]  # fmt: skip
# JSON texts Python would not write but another writer may leave.
KEY_TEXTS = ['{"c": -0}', '{"c": 1E3}', '{"c": 10000000000000000000000}', '{"c": "\\u00e9"}']


@pytest.mark.parametrize("root", ["payload", "metadata"])
def test_the_insert_triggers_spelling_gives_every_key_the_statements_give(root: str) -> None:
    """Both SQLite spellings of the rule, run on the same documents, give the same key."""
    docs = [json.dumps({"c": value}) for value in KEY_VALUES] + KEY_TEXTS
    docs += ['{"c": {"d": "x"}}', '{"d": "x"}', "{}", "[]"]
    statements = (
        f"select {RULE['sqlite'][0]} from (select :doc as payload, :doc as metadata)",
        f"select (select {TRIGGER_RULE} from (select {_DOC} as doc) as found) "
        "from (select :doc as payload, :doc as metadata)",
    )
    conn = sqlite3.connect(":memory:")
    try:
        for path in ("$.c", "$.c.d"):
            params = [{"doc": doc, "key_root": root, "key_path": path} for doc in docs]
            keys = [[conn.execute(sql, p).fetchone()[0] for p in params] for sql in statements]
            assert keys[0] == keys[1]
            assert any(key is not None for key in keys[0])
    finally:
        conn.close()


# The gate the fitting claim and the keyed page both decide by: the stored amount and
# the running tasks the limit governs, counted up to one past what the claim leaves.
GATE = re.compile(r"stored as materialized \( .*?\) as upto \)")


@pytest.mark.parametrize("dialect", sorted(RULE))
def test_the_fitting_claim_counts_the_running_tasks_as_the_keyed_page_does(dialect: str) -> None:
    """Each spelling of the gate is the same text, so the fitting claim takes tasks only
    where the pages would admit them all."""
    page = "limits_claim_keyed.sql" if dialect == "postgres" else "limits_admit_keyed.sql"
    gates = [
        GATE.findall(_text(STATEMENTS / dialect / name))
        for name in (page, "limits_claim_fitting.sql")
    ]
    assert len(gates[0]) == 1
    assert gates[0] == gates[1]
