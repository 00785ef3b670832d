"""The dashboard's batch page over HTTP: a batch's counts, callbacks and members."""

from __future__ import annotations

from cairnq import kernel
from cairnq.dashboard import create_app
from cairnq.extensions.batches import _ops as _batches

from ._db import Database
from .test_batches import _claim_reference
from .test_dashboard import http


async def test_the_batch_page_shows_counts_callbacks_and_each_member_s_outcome(
    db: Database,
) -> None:
    async with db.client() as cq:
        batch = await cq.batch([("job", {"n": n}) for n in range(3)], on_complete="cb")
        [first, *_] = await _claim_reference(cq)
        await cq.backend.arun(kernel.complete(first, "ref", "1"), write=True)
        await cq.backend.arun(_batches.sweep(), write=True)
        async with http(create_app(cq)) as client:
            page = (await client.get("/batch", params={"id": batch.id})).text
        assert f'data-batch="{batch.id}"' in page
        assert "1 / 3 ended" in page
        assert page.count("data-batch-member=") == 3
        assert 'data-batch-callback="on_complete"' in page


async def test_the_batch_page_of_an_unknown_id_is_not_found(db: Database) -> None:
    async with db.client() as cq:
        async with http(create_app(cq)) as client:
            response = await client.get("/batch", params={"id": "batch_nope"})
        assert response.status_code == 404
