# The reference SDK's quick start, as its users write it:
# a worker with @worker.task, a client that submits, calls and looks up by key.
import asyncio

from cairnq import CairnQ, Worker

worker = Worker.sqlite("tasks.db", queues=("default",), concurrency=4)


@worker.task
async def resize(ctx, payload):
    await ctx.progress(0.5, "resizing")
    return {"width": payload["width"], "ok": True}


@worker.task("reports.monthly")
def monthly(ctx, payload):
    return {"month": payload["month"], "rows": 42}


async def main():
    async with CairnQ.sqlite("tasks.db") as cq:
        async with worker.background():
            result = await cq.call("resize", {"width": 640}, timeout_ms=10_000)
            print("call:", result)

            task = await cq.submit("reports.monthly", {"month": "2026-11"}, key="report:2026-11")
            again = await cq.submit(
                "reports.monthly", {"month": "2026-11"}, key="report:2026-11",
                conflict="reuse-succeeded",
            )
            assert again.id == task.id
            done = await cq.wait(task.id, timeout_ms=10_000)
            print("wait:", done.status, done.result)

            by_key = await cq.get_by_key("report:2026-11")
            print("get_by_key:", by_key.id == task.id, by_key.status)
            print("stats:", (await cq.stats())["default"]["succeeded"])


asyncio.run(main())
