"""The statement tap hears what reaches a database, so its silence proves a refusal never did."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from cairnq import AlreadyExists, InvalidArgument

from ._db import Database
from ._statements import sent_anywhere, sent_statements
from .test_cli import db_args, run


async def test_the_tap_hears_a_submit_hand_its_operation_and_send_its_insert(
    db: Database,
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent:
            await cq.submit("job")
    assert any(line.startswith("-- arun ") for line in sent)
    assert any("insert into cairnq_tasks" in line for line in sent)


async def test_the_tap_hears_a_refusal_the_database_decides(db: Database) -> None:
    async with db.client() as cq:
        await cq.submit("job", key="k")
        with sent_statements(db) as sent, pytest.raises(AlreadyExists):
            await cq.submit("job", key="k", conflict="reject")
    assert any(line.startswith("-- arun ") for line in sent)
    assert any("cairnq_tasks" in line and not line.startswith("--") for line in sent)


async def test_the_tap_hears_nothing_from_a_refusal_made_before_the_backend(
    db: Database,
) -> None:
    async with db.client() as cq:
        with sent_statements(db) as sent, pytest.raises(InvalidArgument):
            await cq.submit("")
    assert sent == []


def test_the_tap_hears_a_sync_client_open_its_database(db: Database) -> None:
    with sent_statements(db) as sent:
        cq = db.sync_client()
        with cq:
            cq.submit("job")
    if db.kind == "sqlite":
        assert sent[0] == "-- connect (writer)"
    assert any(line.startswith("-- run ") for line in sent)
    assert any("cairnq_migrations" in line for line in sent)
    assert any("insert into cairnq_tasks" in line for line in sent)


def test_the_tap_stops_hearing_when_closed(db: Database) -> None:
    with db.sync_client() as cq:
        with sent_statements(db) as sent:
            cq.submit("first")
        heard = len(sent)
        cq.submit("second")
    assert heard > 0
    assert len(sent) == heard


def test_the_tap_anywhere_hears_a_command_open_its_own_connection_and_read(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    # Closed before the tap: a pool still open could open or set up a connection of its
    # own in the background meanwhile, and the tap hears every connection of the process.
    with db.sync_client() as cq:
        cq.submit("job")
    with sent_anywhere() as sent:
        assert run(capsys, "ls", *db_args(db)).code == 0
    assert sent[0].startswith("-- connect ")
    assert any("cairnq_migrations" in line for line in sent)
    assert any("from cairnq_tasks" in line for line in sent)


def test_the_tap_anywhere_hears_nothing_from_a_command_refused_before_the_database(
    db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with sent_anywhere(db) as sent:
        assert run(capsys, "ls", "--status", "lost", *db_args(db)).code == 2
    assert sent == []


def test_the_tap_anywhere_puts_back_what_it_replaced() -> None:
    def connects() -> tuple[object, ...]:
        return (
            sqlite3.connect,
            psycopg.connect,
            psycopg.Connection.connect,
            psycopg.AsyncConnection.connect,
        )

    before = connects()
    with sent_anywhere():
        assert all(a != b for a, b in zip(connects(), before, strict=True))
    assert connects() == before
