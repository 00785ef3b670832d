"""A third-party extension through the public interface, and the guide that shows it.

``tests/audit_ext/`` is an extension outside cairnq, written as
``docs/writing-an-extension.md`` shows it (``test_every_code_block_of_the_guide_*``
keeps the page and the files the same): its own migrations, statements, hook,
command and page. Each test installs it in this process (``CairnQ(extensions=)``,
``Worker(extensions=)``, ``--extension``) and the ``audit`` fixture takes it out
again, so no other test sees its migration.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import io
import json
import re
import sys
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import cairnq
from cairnq import CairnQ, InvalidArgument, InvalidExtension, SyncCairnQ, Worker, kernel
from cairnq._sql import load_migrations, load_statements
from cairnq.cli import main
from cairnq.extensions import Extension, install
from cairnq.kernel.points import Points, always
from cairnq.kernel.setup import newer_migrations
from cairnq.models import Lease
from cairnq.protocol.statements import drop_folder, migrations, statements

from ._db import Database
from .audit_ext import Audit, AuditLog, SyncAuditLog, entries, record
from .test_cli import db_args
from .test_dashboard import http
from .test_extension_rules import foreign_keys_to, protocol_tables
from .test_migrate_repair import outside

ROOT = Path(__file__).parents[1]
GUIDE = ROOT / "docs" / "writing-an-extension.md"
PACKAGE = Path(__file__).parent / "audit_ext"
MIGRATION = "x_audit_0001_log.sql"
SPEC = "tests.audit_ext:Audit"

pytestmark = pytest.mark.fresh_schema


@pytest.fixture
def audit() -> Iterator[Audit]:
    """The audit extension; this process forgets its folder afterwards."""
    try:
        yield Audit()
    finally:
        drop_folder(resources.files(Audit.package))


def client(db: Database, extensions: Sequence[Extension] = (), **options: Any) -> CairnQ:
    """A client with ``extensions`` on a backend of ``db`` (made with ``options``) it owns."""
    cq = CairnQ(db.backend(**options), extensions=extensions)
    cq._owns_backend = True
    return cq


async def settle_two(cq: CairnQ, audit: Audit) -> tuple[str, str]:
    """One task that succeeds and one that fails, run by a worker with the extension."""
    worker = Worker(cq, poll_interval_ms=20, extensions=[audit])

    @worker.task
    async def ok(ctx: Any) -> None:
        return None

    @worker.task
    async def broken(ctx: Any) -> None:
        raise cairnq.TaskError("no")

    good = await cq.submit("ok")
    bad = await cq.submit("broken", max_attempts=1)
    await worker.run(until_idle=True)
    await worker.close()
    return good.id, bad.id


async def test_the_extension_migrates_loads_and_records_every_settlement(
    db: Database, audit: Audit
) -> None:
    async with client(db, extensions=[audit]) as cq:
        applied = await cq.backend.arun(kernel.applied_migrations(), write=False)
        assert MIGRATION in applied
        assert {"audit_record", "audit_list"} <= set(statements(db.kind))  # type: ignore[arg-type]
        assert newer_migrations(db.kind, applied) == []  # type: ignore[arg-type]
        good, bad = await settle_two(cq, audit)
        rows = await cq.backend.arun(entries(), write=False)
        assert sorted((r["task_id"], r["outcome"]) for r in rows) == sorted(
            [(good, "succeeded"), (bad, "failed")]
        )
        assert [r["task_id"] for r in await cq.backend.arun(entries(good), write=False)] == [good]


def test_migrate_applies_the_extension_s_migrations(db: Database, audit: Audit) -> None:
    applied = cairnq.migrate(db.backend(), extensions=[audit])
    assert applied[-1] == MIGRATION


async def test_the_extension_keeps_the_rules_of_cairnq_s_own(db: Database, audit: Audit) -> None:
    async with client(db, extensions=[audit]) as cq:
        await settle_two(cq, audit)
        assert len(await cq.backend.arun(entries(), write=False)) == 2
    assert foreign_keys_to(db, list(Audit.tables), protocol_tables()) == []
    # The reference SDK's test reset (a delete on SQLite) empties the log too.
    reset = "truncate cairnq_tasks, cairnq_task_keys" if db.kind == "postgres" else None
    outside(db, reset or "delete from cairnq_tasks")
    assert outside(db, "select count(*) from cairnq_audit_log") == [(0,)]


async def test_the_audit_row_is_written_in_the_settlement_transaction(
    db: Database, audit: Audit
) -> None:
    audited = Points(attempt_end=((record, None, always),))

    def then_fail(op: Any) -> Any:
        yield from op
        raise RuntimeError("the settlement's transaction rolls back")

    async with client(db, extensions=[audit]) as cq:
        task = await cq.submit("job")
        claim = kernel.claim(["default"], "w1", 60_000, [kernel.Draw(None, 1)], 10)
        lease = Lease.of((await cq.backend.arun(claim, write=True))[0])
        with pytest.raises(RuntimeError):
            await cq.backend.arun(
                then_fail(kernel.complete(lease, "w1", None, points=audited)), write=True
            )
        assert (await cq.get(task.id)).status == "running"  # type: ignore[union-attr]
        assert await cq.backend.arun(entries(), write=False) == []
        await cq.backend.arun(kernel.complete(lease, "w1", None, points=audited), write=True)
        assert (await cq.get(task.id)).status == "succeeded"  # type: ignore[union-attr]
        rows = await cq.backend.arun(entries(), write=False)
        assert [(r["task_id"], r["attempt"], r["outcome"]) for r in rows] == [
            (task.id, 1, "succeeded")
        ]


async def test_a_recovery_of_an_expired_lease_is_audited_as_lost(
    db: Database, audit: Audit
) -> None:
    audited = Points(attempt_end=((record, None, always),))
    async with client(db, extensions=[audit]) as cq:
        task = await cq.submit("job")
        claim = kernel.claim(["default"], "w1", 100, [kernel.Draw(None, 1)], 10)
        assert len(await cq.backend.arun(claim, write=True)) == 1
        await asyncio.sleep(0.3)
        again = kernel.claim(["default"], "w2", 60_000, [kernel.Draw(None, 1)], 10, points=audited)
        assert [r["id"] for r in await cq.backend.arun(again, write=True)] == [task.id]
        rows = await cq.backend.arun(entries(), write=False)
        assert [(r["task_id"], r["outcome"]) for r in rows] == [(task.id, "lost")]


async def test_a_process_that_does_not_know_the_extension_keeps_working(
    db: Database, audit: Audit
) -> None:
    async with client(db, extensions=[audit]) as cq:
        good, _ = await settle_two(cq, audit)
    # The reference-shaped process: no extension, and it never migrates.
    drop_folder(resources.files(Audit.package))
    assert all(m.name != MIGRATION for m in migrations(db.kind))  # type: ignore[arg-type]
    async with client(db, migrate=False) as cq:
        worker = Worker(cq, poll_interval_ms=20)

        @worker.task
        async def ok(ctx: Any) -> None:
            return None

        later = await cq.submit("ok")
        await worker.run(until_idle=True)
        await worker.close()
        assert (await cq.get(later.id)).status == "succeeded"  # type: ignore[union-attr]
        applied = await cq.backend.arun(kernel.applied_migrations(), write=False)
        assert MIGRATION in applied and newer_migrations(db.kind, applied) == []  # type: ignore[arg-type]
        assert len(await cq.purge()) == 3
    # Opening with migrate=True checks the schema for damage: the unknown x_ file is none.
    async with client(db) as cq:
        assert await cq.stats() is not None
    install([audit])
    async with client(db, extensions=[audit]) as cq:
        # The delete trigger forgot the purged tasks' rows; the later task was unaudited.
        assert await cq.backend.arun(entries(), write=False) == []
        assert good


async def test_the_command_and_the_page_answer(
    db: Database, audit: Audit, capsys: pytest.CaptureFixture[str]
) -> None:
    out = io.StringIO()
    assert main(["migrate", *db_args(db), "--extension", SPEC], out=out) == 0
    async with client(db, migrate=False) as cq:
        assert MIGRATION in await cq.backend.arun(kernel.applied_migrations(), write=False)
    async with client(db, extensions=[audit]) as cq:
        good, bad = await settle_two(cq, audit)
    out = io.StringIO()
    assert main(["audit", good, *db_args(db), "--extension", SPEC], out=out) == 0
    assert out.getvalue() == f"{good}  attempt 1  succeeded\n"
    out = io.StringIO()
    assert main(["--extension", SPEC, "audit", "--help"], out=out) == 0
    from cairnq.dashboard import create_app

    async with client(db) as cq:
        app = create_app(cq, extensions=[audit])
        async with http(app) as browser:
            page = await browser.get("/audit")
            overview = await browser.get("/")
    assert page.status_code == 200
    assert page.text.count("data-audit") == 2 and good in page.text and bad in page.text
    assert 'href="/audit"' in overview.text


async def test_the_extension_adds_to_get_top_and_the_task_page(db: Database, audit: Audit) -> None:
    assert main(["migrate", *db_args(db), "--extension", SPEC], out=io.StringIO()) == 0
    async with client(db, extensions=[audit]) as cq:
        good, bad = await settle_two(cq, audit)
    out = io.StringIO()
    assert main(["get", good, *db_args(db), "--extension", SPEC], out=out) == 0
    assert json.loads(out.getvalue())["audit"] == ["succeeded"]
    out = io.StringIO()
    assert main(["top", "-n", "1", *db_args(db), "--extension", SPEC], out=out) == 0
    assert f"audit: {bad} failed" in out.getvalue().splitlines()
    from cairnq.dashboard import create_app

    async with client(db) as cq, http(create_app(cq, extensions=[audit])) as browser:
        page = await browser.get("/task", params={"id": bad})
    assert page.status_code == 200
    assert page.text.count("data-audit") == 1 and '<div data-live-part="audit">' in page.text


async def test_the_namespace_reads_the_log_through_the_client(db: Database, audit: Audit) -> None:
    async with client(db, extensions=[audit]) as cq:
        good, bad = await settle_two(cq, audit)
        log = cq.extension(Audit)
        assert isinstance(log, AuditLog) and cq.extension(Audit) is log
        assert await log.recent() == await cq.backend.arun(entries(), write=False)
        assert [r["outcome"] for r in await log.recent(good)] == ["succeeded"]
        # The newest row: the two settlements may share a millisecond, so either task.
        (newest,) = await log.recent(limit=1)
        assert newest["task_id"] in {good, bad}
        assert newest["at_ms"] == max(r["at_ms"] for r in await log.recent())


async def test_the_blocking_client_has_the_blocking_namespace(db: Database, audit: Audit) -> None:
    async with client(db, extensions=[audit]) as cq:
        good, _ = await settle_two(cq, audit)
    with db.sync_client(extensions=[audit]) as sync:
        log = sync.extension(Audit)
        assert isinstance(log, SyncAuditLog) and sync.extension(Audit) is log
        assert [r["outcome"] for r in log.recent(good)] == ["succeeded"]
        assert len(log.recent()) == 2


def test_a_client_not_given_the_extension_refuses_its_namespace(db: Database, audit: Audit) -> None:
    cq = CairnQ(db.backend(), extensions=[])
    with pytest.raises(InvalidExtension, match=re.escape("CairnQ(..., extensions=[Audit()])")):
        cq.extension(Audit)
    sync = SyncCairnQ(db.backend())
    with pytest.raises(InvalidExtension, match=re.escape("tests.audit_ext")):
        sync.extension(Audit)


def test_an_extension_without_a_namespace_is_refused_by_name(db: Database, audit: Audit) -> None:
    bare = type("Bare", (Audit,), {"sync_namespace": None})()
    sync = SyncCairnQ(db.backend(), extensions=[bare])
    with pytest.raises(InvalidExtension, match=r"declares no namespace for a SyncCairnQ"):
        sync.extension(type(bare))  # type: ignore[arg-type]


def test_the_namespace_is_asked_for_by_the_extension_s_class(db: Database, audit: Audit) -> None:
    cq = CairnQ(db.backend(), extensions=[audit])
    with pytest.raises(InvalidArgument, match=r"expected an Extension class"):
        cq.extension(audit)  # type: ignore[arg-type]


async def test_the_extension_s_option_turns_the_log_off(db: Database, audit: Audit) -> None:
    async with client(db, extensions=[audit]) as cq:
        worker = Worker(cq, poll_interval_ms=20, extensions=[Audit(audit=False)])

        @worker.task
        async def ok(ctx: Any) -> None:
            return None

        task = await cq.submit("ok")
        await worker.run(until_idle=True)
        await worker.close()
        assert (await cq.get(task.id)).status == "succeeded"  # type: ignore[union-attr]
        assert await cq.extension(Audit).recent() == []


def test_a_bad_option_is_refused_when_the_extension_is_built() -> None:
    with pytest.raises(InvalidArgument, match="audit must be True or False"):
        Audit(audit="no")


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_the_protocol_files_include_an_installed_extension_s(dialect: str, audit: Audit) -> None:
    assert "audit_list" not in load_statements(dialect)
    install([audit])
    assert {"audit_list", "audit_record"} <= set(load_statements(dialect))
    assert load_migrations(dialect)[-1][0] == MIGRATION


def test_the_command_line_refuses_an_extension_it_cannot_load(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--extension", "tests.audit_ext:Nothing", "stats"], out=io.StringIO()) == 1
    assert "tests.audit_ext:Nothing" in capsys.readouterr().err
    assert main(["--extension", "tests.audit_ext:entries", "stats"], out=io.StringIO()) == 1
    assert "is not a cairnq Extension" in capsys.readouterr().err


def package(tmp_path: Path, name: str, files: dict[str, str]) -> str:
    """A package ``name`` under ``tmp_path`` (on ``sys.path``) holding ``files``."""
    for relative, text in {"__init__.py": "", **files}.items():
        path = tmp_path / name / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return name


def both(kind: str, file: str, text: str = "select 1") -> dict[str, str]:
    return {f"{kind}/sqlite/{file}": text, f"{kind}/postgres/{file}": text}


@pytest.mark.parametrize(
    ("declared", "files", "refusal"),
    [
        ({"name": "Audit"}, {}, "lower-case letters"),
        ({"name": "limits"}, {}, "cairnq's own extensions"),
        ({"migrations": ("x0100_log.sql",)}, both("migrations", "x0100_log.sql"), "not named"),
        ({}, both("migrations", "x_bad_0001_log.sql"), "not in its declared migrations"),
        (
            {"migrations": ("x_bad_0001_log.sql",)},
            {"migrations/sqlite/x_bad_0001_log.sql": "select 1"},
            "not in migrations/postgres/",
        ),
        ({}, both("sql", "log_list.sql"), "is not named bad_*"),
        ({"tables": {"cairnq_log": "trigger"}}, {}, "table cairnq_log is not named cairnq_bad_*"),
        (
            {},
            both("sql", "bad_touch.sql", "update cairnq_tasks set priority = 0 where id = :id"),
            "statement sql/sqlite/bad_touch.sql writes cairnq_tasks, cairnq's own",
        ),
    ],
)
def test_a_bad_declaration_is_refused_before_anything_is_added(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    declared: dict[str, Any],
    files: dict[str, str],
    refusal: str,
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    found = package(tmp_path, f"bad_{len(sys.path)}_{abs(hash(refusal))}", files)
    bad = type("Bad", (Extension,), {"name": "bad", "package": found, **declared})()
    before = len(migrations("sqlite")), len(statements("sqlite"))
    with pytest.raises(InvalidExtension, match=re.escape(refusal)):
        install([bad])
    with pytest.raises(InvalidExtension):
        Worker("sqlite:///" + str(tmp_path / "w.db"), extensions=[bad])
    assert (len(migrations("sqlite")), len(statements("sqlite"))) == before


def test_a_statement_another_folder_defines_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, audit: Audit
) -> None:
    install([audit])
    monkeypatch.syspath_prepend(str(tmp_path))
    twin = package(tmp_path, "audit_twin", both("sql", "audit_list.sql"))
    other = type("Twin", (Extension,), {"name": "audit", "package": twin})()
    with pytest.raises(InvalidExtension, match=r"audit_list .* is defined twice"):
        install([other])


def test_the_extension_imports_only_cairnq_s_public_modules() -> None:
    public = {"cairnq", "cairnq.extensions", "cairnq.cli", "cairnq.dashboard"}
    for file in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                assert not name.startswith("cairnq") or name in public, f"{file.name}: {name}"


# --- the guide ------------------------------------------------------------------------

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_FIRST = re.compile(r"^(?:#|--|\{#) (audit_ext/\S+)")
_DOTTED = re.compile(r"`(cairnq(?:\.[A-Za-z_]\w*)+)`")


def guide_blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(GUIDE.read_text())]


def guide_block(language: str) -> str:
    (block,) = [b for lang, b in guide_blocks() if lang == language]
    return block


def in_order(lines: list[str], text: str) -> bool:
    """Whether each of ``lines`` is a line of ``text`` (both stripped), in order."""
    rest = iter(line.strip() for line in text.splitlines())
    return all(any(line.strip() == other for other in rest) for line in lines if line.strip())


def test_every_code_block_of_the_guide_is_a_file_of_the_extension_or_run_here() -> None:
    shown = set()
    here = Path(__file__).read_text()
    for language, block in guide_blocks():
        first = _FIRST.match(block)
        if first is not None:
            name = first.group(1)
            assert (PACKAGE.parent / name).read_text() == block, f"{name} differs from the guide"
            shown.add(name)
        elif language == "console":
            assert all(line.startswith("$ cairnq ") for line in block.splitlines())
        elif language == "toml":
            assert entry_point_of(block) == ("audit", "audit_ext:Audit")
        else:
            assert language == "python" and in_order(block.splitlines(), here), block
    files = {
        str(p.relative_to(PACKAGE.parent))
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert shown == files


def test_every_cairnq_name_the_guide_quotes_exists() -> None:
    for dotted in _DOTTED.findall(GUIDE.read_text()):
        module, _, attr = dotted.rpartition(".")
        try:
            target: object = importlib.import_module(dotted)
        except ImportError:
            target = getattr(importlib.import_module(module), attr, None)
        assert target is not None, dotted


def test_the_guide_s_commands_parse(capsys: pytest.CaptureFixture[str]) -> None:
    for line in guide_block("console").splitlines():
        argv = line.removeprefix("$ cairnq ").replace("audit_ext:Audit", SPEC).split()
        argv = [arg for arg in argv if arg != "TASK_ID"]
        assert main([*argv, "--help"], out=io.StringIO()) == 0, line


def entry_point_of(toml: str) -> tuple[str, str]:
    tomllib = pytest.importorskip("tomllib")
    ((name, value),) = tomllib.loads(toml)["project"]["entry-points"]["cairnq.extensions"].items()
    return name, value


async def test_the_guide_s_entry_point_loads_the_extension_for_the_command_line(
    db: Database, audit: Audit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, value = entry_point_of(guide_block("toml"))
    found = tmp_path / "audit_ext-1.0.dist-info"
    found.mkdir()
    (found / "METADATA").write_text("Metadata-Version: 2.1\nName: audit-ext\nVersion: 1.0\n")
    (found / "entry_points.txt").write_text(f"[cairnq.extensions]\n{name} = tests.{value}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["migrate", *db_args(db)], out=io.StringIO()) == 0
    async with client(db, extensions=[audit]) as cq:
        good, _ = await settle_two(cq, audit)
    out = io.StringIO()
    assert main(["audit", good, *db_args(db)], out=out) == 0
    assert out.getvalue() == f"{good}  attempt 1  succeeded\n"


async def test_the_guide_s_usage(db: Database, audit: Audit) -> None:
    url = db.backend()  # the test's database (the guide gives a URL)
    cq = CairnQ(url, extensions=[Audit()])
    worker = Worker(cq)

    @worker.task
    async def job(ctx: Any) -> None:
        return None

    async with cq:
        await cq.submit("job")
        await worker.run(until_idle=True)
        rows = await cq.extension(Audit).recent()
    await worker.close()
    assert [r["outcome"] for r in rows] == ["succeeded"]
