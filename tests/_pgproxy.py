"""A small TCP proxy in front of PostgreSQL that can drop server messages by type.

Used to reproduce what a transaction-mode pooler does to LISTEN: queries work,
notifications (``A`` messages) never arrive. Connect through it with
``sslmode=disable`` so every server message is a typed, length-prefixed frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections.abc import Iterator


class PgProxy:
    """Forwards 127.0.0.1:<port> to PostgreSQL, dropping server messages in ``drop``.

    With ``connect_delay_s``, each new connection reaches the server only that long
    after it is accepted: a server slow to hand out connections.
    """

    def __init__(
        self,
        upstream_port: int = 5432,
        drop: frozenset[bytes] = frozenset(),
        *,
        connect_delay_s: float = 0.0,
    ) -> None:
        self.upstream_port = upstream_port
        self.drop = drop
        self.connect_delay_s = connect_delay_s
        self.port = 0
        self.dropped = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._writers: set[asyncio.StreamWriter] = set()
        self._pairs: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self._listening: set[asyncio.StreamWriter] = set()
        self._holes: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _shutdown(self) -> None:
        assert self._server is not None
        self._server.close()
        # A connection accepted just now has a handler task that has not run yet: let
        # each take its first step, which registers its writer to be closed below
        # (cancelled before that, it would leave its socket to the garbage collector).
        await asyncio.sleep(0)
        for writer in list(self._writers):
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # A handler whose upstream connection opened while the writers above were being
        # closed registered that writer after the list was taken: it is closed here.
        for writer in list(self._writers):
            if not writer.is_closing():
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        if self.connect_delay_s:
            await asyncio.sleep(self.connect_delay_s)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self._writers.add(up_writer)
        self._pairs.append((writer, up_writer))
        await asyncio.gather(
            self._pipe(reader, up_writer, writer), self._server_to_client(up_reader, writer)
        )

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client: asyncio.StreamWriter,
    ) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                if b"listen " in data.lower():
                    self._listening.add(client)
                if client in self._holes:
                    continue
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _server_to_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                kind = await reader.readexactly(1)
                (length,) = struct.unpack("!I", await reader.readexactly(4))
                body = await reader.readexactly(length - 4)
                if kind in self.drop or writer in self._holes:
                    self.dropped += 1
                    continue
                writer.write(kind + struct.pack("!I", length) + body)
                await writer.drain()
        writer.close()

    def opened_since_cut(self) -> int:
        """How many connections were opened through the proxy since the last ``cut_all``."""
        return len(self._pairs)

    def cut_all(self) -> int:
        """Reset every connection open through the proxy now; returns how many."""

        async def cut() -> int:
            pairs, self._pairs = self._pairs, []
            for client, upstream in pairs:
                for writer in (client, upstream):
                    transport = writer.transport
                    if transport is not None and not transport.is_closing():
                        transport.abort()
            return len(pairs)

        return asyncio.run_coroutine_threadsafe(cut(), self._loop).result(timeout=10)

    def blackhole(self, *, listening: bool) -> int:
        """Stop forwarding, both ways, on the open connections that did (or did not) LISTEN.

        The sockets stay open: to both ends the connection looks alive but silent
        (half-open). Returns how many connections were affected.
        """

        async def swallow() -> int:
            chosen = [c for c, _ in self._pairs if (c in self._listening) == listening]
            self._holes.update(chosen)
            return len(chosen)

        return asyncio.run_coroutine_threadsafe(swallow(), self._loop).result(timeout=10)

    def heal(self) -> None:
        """Forward again on every connection (the bytes swallowed meanwhile stay lost)."""

        async def restore() -> None:
            self._holes.clear()

        asyncio.run_coroutine_threadsafe(restore(), self._loop).result(timeout=10)

    def __enter__(self) -> PgProxy:
        self._thread.start()
        self._ready.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


@contextlib.contextmanager
def dropping_notifications() -> Iterator[PgProxy]:
    """A proxy that behaves like a transaction pooler towards LISTEN."""
    with PgProxy(drop=frozenset({b"A"})) as proxy:
        yield proxy
