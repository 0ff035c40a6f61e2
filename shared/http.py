"""The HTTP side of every service: /metrics (Prometheus), /healthz (alive), /readyz (dependencies answer)."""
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

log = logging.getLogger("engram.http")
ReadyCheck = Callable[[], Awaitable[str | None]]  # None when ready, else why not


async def _respond(writer: asyncio.StreamWriter, status: str, body: bytes, content_type: str) -> None:
    writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                 "Connection: close\r\n\r\n".encode() + body)
    await writer.drain()
    writer.close()


def _handler(ready: ReadyCheck) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = (await asyncio.wait_for(reader.readline(), timeout=5)).decode(errors="replace")
            while (await asyncio.wait_for(reader.readline(), timeout=5)) not in (b"\r\n", b"\n", b""):
                pass  # headers are not needed
            path = request_line.split(" ")[1] if request_line.count(" ") >= 2 else "/"
            if path.startswith("/metrics"):
                await _respond(writer, "200 OK", generate_latest(), CONTENT_TYPE_LATEST)
            elif path.startswith("/healthz"):
                await _respond(writer, "200 OK", b"ok\n", "text/plain")
            elif path.startswith("/readyz"):
                problem = await ready()
                if problem is None:
                    await _respond(writer, "200 OK", b"ready\n", "text/plain")
                else:
                    await _respond(writer, "503 Service Unavailable", f"{problem}\n".encode(), "text/plain")
            else:
                await _respond(writer, "404 Not Found", b"try /metrics, /healthz or /readyz\n", "text/plain")
        except (TimeoutError, ConnectionError, IndexError):
            writer.close()

    return handle


@contextlib.asynccontextmanager
async def serving(host: str, port: int, ready: ReadyCheck) -> AsyncIterator[int]:
    """Serve the three endpoints for the duration of the block; yields the bound port (0 picks one)."""
    server = await asyncio.start_server(_handler(ready), host, port)
    bound = int(server.sockets[0].getsockname()[1])
    log.info("metrics and health on http://%s:%d", host, bound)
    try:
        yield bound
    finally:
        server.close()
        await server.wait_closed()
