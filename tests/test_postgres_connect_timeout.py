"""``connect_timeout``: how long opening a PostgreSQL client keeps trying to reach the
server, and a refusal no wait can fix reported at the first attempt."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from cairnq import CairnQ, DatabaseUnavailable, InvalidArgument, SyncCairnQ
from cairnq.backends import PostgresBackend

from .conftest import PG_URL
from .test_worker_cli import free_port

pytest.importorskip("psycopg_pool")


@pytest.mark.parametrize("value", [0, 0.5, "500ms", "2h", "30", True, None, [30]], ids=repr)
def test_a_bad_connect_timeout_is_refused_before_any_connection(value: Any) -> None:
    url = f"postgresql://cairnq@127.0.0.1:{free_port()}/app"
    with pytest.raises(InvalidArgument, match="connect_timeout"):
        PostgresBackend(url, connect_timeout=value)
    if value is not None:  # None is CairnQ.postgres's default: 30 s
        with pytest.raises(InvalidArgument, match="connect_timeout"):
            SyncCairnQ.postgres(url, connect_timeout=value)


def test_opening_on_a_port_nothing_listens_on_gives_up_after_connect_timeout() -> None:
    url = f"postgresql://cairnq@127.0.0.1:{free_port()}/app"
    with (
        pytest.raises(DatabaseUnavailable, match=r"cannot reach .*Connection refused") as raised,
        SyncCairnQ.postgres(url, connect_timeout="1s") as cq,
    ):
        cq.stats()
    assert raised.value.retryable is not False


@pytest.mark.postgres
async def test_a_database_that_does_not_exist_is_refused_for_good_at_the_first_attempt(
    pg_dsn: str,
) -> None:
    url = urlunsplit(urlsplit(PG_URL)._replace(path="/cairnq_no_such_database"))
    # An hour to connect: only a refusal reported at the first attempt ends this test.
    cq = CairnQ.postgres(url, connect_timeout="1h", listen=False)
    with pytest.raises(DatabaseUnavailable, match="does not exist") as raised:
        await cq.open()
    await cq.close()
    assert raised.value.retryable is False
