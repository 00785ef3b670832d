"""The conformance runner and its CLI; each scenario on each backend is in the driver suite."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cairnq.cli import main
from cairnq.conformance import load_scenarios, run_paths, run_scenario
from cairnq.drivertest.test_conformance import scenario_dir, scenario_files

from ._db import Database


def test_the_suite_holds_all_36_scenarios() -> None:
    assert len(scenario_files()) == 36


def test_scenarios_pass_with_real_sleeps(db: Database) -> None:
    url = db.url if db.kind == "postgres" else "sqlite:///unused.db"
    timed = [p for p in scenario_files() if '"sleep"' in p.read_text()]
    results = run_paths(timed, url, real_clock=True)
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    assert len(results) == len(timed) > 0


@pytest.mark.parametrize("via", ["client", "store"])
def test_cairnq_conformance_passes_all_36_scenarios_through_the_client_and_the_store(
    db: Database, tmp_path: Path, via: str
) -> None:
    script = Path(sys.executable).parent / "cairnq"
    url = db.url if db.kind == "postgres" else f"sqlite:///{tmp_path / 'unused.db'}"
    run = subprocess.run(
        [str(script), "conformance", str(scenario_dir()), "--db", url, "--via", via],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == "36 passed, 0 failed"


def test_timed_scenarios_pass_through_the_store_layer_with_real_sleeps(db: Database) -> None:
    url = db.url if db.kind == "postgres" else "sqlite:///unused.db"
    timed = [p for p in scenario_files() if '"sleep"' in p.read_text()]
    results = run_paths(timed, url, real_clock=True, via="store")
    assert [(r.name, r.detail) for r in results if not r.passed] == []
    assert len(results) == len(timed) > 0


def test_the_store_layer_mode_reports_an_unexpected_lost_lease(db: Database) -> None:
    scenario = {
        "name": "wrong",
        "steps": [
            {"op": "submit", "args": {"name": "job"}, "save": "t"},
            {"op": "claim", "args": {"queues": ["default"], "worker_id": "w1"}},
            {"op": "complete", "args": {"id": "$t.id", "worker_id": "w2", "result": 1}},
        ],
    }
    result = run_scenario(scenario, _scenario_factory(db), via="store")
    assert not result.passed
    assert result.detail.startswith("LostLease")


def test_an_unknown_via_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="via must be one of client, store, ops"):
        run_paths([scenario_dir()], f"sqlite:///{tmp_path / 'x.db'}", via="api")  # type: ignore[arg-type]


def _scenario_factory(db: Database):  # type: ignore[no-untyped-def]
    from cairnq.conformance import factory_for

    return factory_for(db.url if db.kind == "postgres" else "sqlite:///unused.db")


def test_runner_reports_a_wrong_expectation(db: Database) -> None:
    scenario = {
        "name": "wrong",
        "steps": [
            {"op": "submit", "args": {"name": "job", "payload": {}}, "save": "t"},
            {"op": "get", "args": {"id": "$t.id"}, "expect": {"equals": {"status": "running"}}},
        ],
    }
    result = run_scenario(scenario, _scenario_factory(db))
    assert not result.passed
    assert "step 2 (get)" in result.detail
    assert "status='running'" in result.detail


def test_runner_reports_a_missing_expected_error(db: Database) -> None:
    scenario = {
        "name": "no-error",
        "steps": [
            {"op": "submit", "args": {"name": "job", "key": "k"}, "expectError": "AlreadyExists"},
        ],
    }
    result = run_scenario(scenario, _scenario_factory(db))
    assert not result.passed
    assert "expected AlreadyExists" in result.detail


def test_runner_accepts_delay_ms_as_well_as_run_at_delay_ms(db: Database) -> None:
    steps = []
    for arg in ("run_at_delay_ms", "delay_ms"):
        steps += [
            {"op": "submit", "args": {"name": "later", arg: 60000}, "save": arg},
            {
                "op": "claim",
                "args": {"queues": ["default"], "worker_id": "w"},
                "expect": {"length": 0},
            },
        ]
    steps.append({"op": "sleep", "args": {"ms": 60000}})
    steps.append(
        {
            "op": "claim",
            "args": {"queues": ["default"], "worker_id": "w", "limit": 5},
            "expect": {"length": 2},
        }
    )
    result = run_scenario({"name": "delays", "steps": steps}, _scenario_factory(db))
    assert result.passed, result.detail


def test_cli_prints_one_line_per_scenario_and_a_total(tmp_path: Path) -> None:
    good = json.loads((scenario_dir() / "basic_submit_get.json").read_text())
    bad = {
        "name": "bad",
        "steps": [{"op": "get", "args": {"id": "nope"}, "expect": {"notNull": ["id"]}}],
    }
    (tmp_path / "a.json").write_text(json.dumps(good))
    (tmp_path / "b.json").write_text(json.dumps(bad))
    out = io.StringIO()
    code = main(["conformance", str(tmp_path), "--db", f"sqlite:///{tmp_path / 'x.db'}"], out=out)
    lines = out.getvalue().splitlines()
    assert code == 1
    assert lines[0] == "PASS basic_submit_get"
    assert lines[1].startswith("FAIL bad: step 1 (get)")
    assert lines[-1] == "1 passed, 1 failed"


def test_cli_exits_zero_when_every_scenario_passes(tmp_path: Path) -> None:
    out = io.StringIO()
    code = main(["conformance", str(scenario_dir()), "--db", "sqlite:///x.db"], out=out)
    assert code == 0, out.getvalue()
    assert out.getvalue().splitlines()[-1] == "36 passed, 0 failed"


def test_loading_a_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no scenario file or directory"):
        load_scenarios([tmp_path / "missing"])
