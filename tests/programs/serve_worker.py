# A worker process served with Worker.serve(): drains on SIGTERM, then exits 0.
# cairnq's log (INFO and up) goes to stderr.
import asyncio
import logging
import sys

from cairnq import Worker

logging.basicConfig(format="%(levelname)s %(message)s")
logging.getLogger("cairnq").setLevel(logging.INFO)

worker = Worker.sqlite(sys.argv[1], poll_interval_ms=50, drain_timeout="10s")


@worker.task
async def slow(ctx, payload):
    with open(sys.argv[2], "a") as marker:
        marker.write(f"started {ctx.task_id}\n")
    await asyncio.sleep(payload["seconds"])
    return {"slept": payload["seconds"]}


worker.serve()
print("served")
