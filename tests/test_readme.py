"""The README's set-up command works as written, from a copy of the source tree; the
Quick start, and the store layer and PostgreSQL pages' examples, run as written."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cairnq import TaskContext, TaskError

from ._db import Database

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _readme_command(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    for block in blocks:
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if lines and lines[0].startswith("#") and marker in lines[0]:
            return lines[1]
    raise AssertionError(f"no README command block marked {marker!r}")


def test_the_readme_names_the_test_command() -> None:
    assert _readme_command("run the tests") == "./scripts/test.sh"


def test_the_readme_set_up_command_installs_and_runs_the_demo(tmp_path: Path) -> None:
    command = _readme_command("set up")
    assert "pip install ." in command
    assert "cairnq demo" in command
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    if not files:
        pytest.fail("the README test needs a git checkout to copy the source tree from")
    clone = tmp_path / "clone"
    for name in files:
        target = clone / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    command = command.replace("python3 ", f"{sys.executable} ", 1)
    done = subprocess.run(
        command, shell=True, cwd=clone, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "summary: 8/8 succeeded" in done.stdout
    assert (clone / "cairnq-demo.db").exists()


# --- the demo the set-up command runs ------------------------------------------------------

CLI = Path(sys.executable).parent / "cairnq"
TABLE_ROW = re.compile(r"^  demo\.\w+ +\w+ +\[[#.]{20}\] +\d+%")


def run_in_a_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``args`` with a pseudo-terminal as stdout and stderr; (exit code, bytes written)."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's last writer has gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(timeout=120), b"".join(chunks).decode()


def screen(output: str) -> list[str]:
    """What a terminal shows after ``output``: lines, line clears, carriage returns, cursor up."""
    rows: list[str] = [""]
    row = col = 0
    for token in re.findall(r"\x1b\[\d*[A-Za-z]|[^\x1b]", output):
        if token == "\n":
            row, col = row + 1, 0
            rows.extend([""] * (row + 1 - len(rows)))
        elif token == "\r":
            col = 0
        elif token == "\x1b[2K":
            rows[row] = ""
        elif token.startswith("\x1b[") and token.endswith("A"):
            row = max(0, row - int(token[2:-1] or 1))
        elif token.startswith("\x1b["):
            raise AssertionError(f"the test's terminal does not know {token!r}")
        else:
            line = rows[row].ljust(col)
            rows[row] = line[:col] + token + line[col + 1 :]
            col += 1
    return rows


def test_the_demo_in_a_terminal_shows_its_final_table_once(tmp_path: Path) -> None:
    code, output = run_in_a_terminal([str(CLI), "demo", "--path", "demo.db"], tmp_path)
    shown = screen(output)
    table = [line for line in shown if TABLE_ROW.match(line)]
    assert code == 0, output[-2000:]
    assert "\x1b[" in output  # it did draw live progress
    assert len(table) == 8, "\n".join(shown)
    assert all(" succeeded [####################] 100%" in line for line in table)


def test_the_demo_ends_by_suggesting_a_next_step_on_its_own_database(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(CLI), "demo", "--path", "demo.db"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.rstrip().splitlines()[-2:]
    assert last[0].startswith("next: `cairnq --db demo.db ls` lists these tasks")
    assert "Quick start in README.md" in last[1]
    listed = subprocess.run(
        [str(CLI), "--db", "demo.db", "ls"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("demo.") == 8


# --- the Quick start and the PostgreSQL notes ----------------------------------------------


def _python_blocks(section: str) -> list[str]:
    """The Python blocks of the README's ``## section``."""
    text = (ROOT / "README.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, re.S)


def _page_python_blocks(page: str) -> list[str]:
    """The Python blocks of ``docs/page``."""
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / page).read_text(), re.S)


def test_the_quick_start_and_the_cli_use_one_database_in_the_working_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "quickstart.py").write_text(_python_blocks("Quick start")[0])
    env = {k: v for k, v in os.environ.items() if k != "CAIRNQ_DATABASE_URL"}
    ran = subprocess.run(
        [sys.executable, "quickstart.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    listed = subprocess.run(
        [str(CLI), "ls"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    assert "resize" in listed.stdout
    assert "reports.monthly" in listed.stdout
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["cairnq.db"]


def test_the_store_layer_example_claims_settles_and_purges_one_task(tmp_path: Path) -> None:
    (tmp_path / "store_example.py").write_text(_page_python_blocks("store.md")[0])
    ran = subprocess.run(
        [sys.executable, "store_example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["succeeded {'ok': True}", "True"]


async def test_the_store_replacement_example_is_called_by_the_clients_purge(
    tmp_path: Path,
) -> None:
    from cairnq import CairnQ

    [example] = [b for b in _page_python_blocks("store.md") if "audited_purge" in b]
    lines: list[str] = []

    class Audit:
        def info(self, message: str, *args: Any) -> None:
            lines.append(message % args)

    async with CairnQ.sqlite(tmp_path / "tasks.db") as cq:
        task = await cq.submit("job")
        await cq.cancel(task.id)
        exec(example, {"cq": cq, "audit": Audit()})
        deleted = await cq.purge(older_than_ms=0)
    assert lines == [f"purged {len(deleted)} tasks"]


def _stated_key_order() -> tuple[dict[str, Any], list[str]]:
    text = " ".join((ROOT / "docs" / "postgres.md").read_text().split())
    found = re.search(r"written as `(\{[^`]*\})` comes back as `(\{[^`]*\})`", text)
    assert found is not None, "docs/postgres.md does not show jsonb key order"
    written, returned = json.loads(found.group(1)), json.loads(found.group(2))
    assert written == returned
    assert list(written) != list(returned)
    return written, list(returned)


async def test_json_objects_keep_their_key_order_on_sqlite_and_jsonb_order_on_postgres(
    db: Database,
) -> None:
    written, jsonb_order = _stated_key_order()
    expected = jsonb_order if db.kind == "postgres" else list(written)
    worker = db.worker(poll_interval_ms=20)

    @worker.task
    async def echo(ctx: TaskContext, payload: Any) -> Any:
        return payload

    @worker.task
    async def refuse(ctx: TaskContext, payload: Any) -> Any:
        raise TaskError("refused", code="no", details=payload)

    async with db.client() as cq, worker.background():
        task = await cq.submit("echo", written, metadata=written, max_attempts=1)
        failed = await cq.submit("refuse", written, max_attempts=1)
        done = await cq.wait(task.id, timeout_ms=30_000)
        ended = await cq.wait(failed.id, timeout_ms=30_000)
    await worker.close()
    assert ended.error is not None
    orders = {
        "payload": list(done.payload),
        "result": list(done.result),
        "metadata": [k for k in done.metadata if k in written],
        "details": list(ended.error["details"]),
    }
    assert orders == dict.fromkeys(orders, expected)
