"""The embedded nats-server launcher: JetStream on a free port, store in a temp folder, clean stop."""
import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import nats
import pytest

from shared.errors import ConfigError
from shared.messaging import nats_server


async def test_starts_with_jetstream_and_stops(tmp_path: Path) -> None:
    """The embedded server takes JetStream publishes, stores them in the given folder, and exits with code 0 on stop."""
    server = nats_server.start(tmp_path / "nats")
    try:
        client = await nats.connect(server.url)
        js = client.jetstream()
        await js.add_stream(name="PROBE", subjects=["probe.>"])
        ack = await js.publish("probe.x", b"hello")
        assert ack.seq == 1
        await client.close()
    finally:
        server.stop()
    assert server.process.returncode == 0
    assert any((tmp_path / "nats").rglob("*PROBE*")), "JetStream did not store in the given folder"


async def test_jetstream_data_survives_a_restart(tmp_path: Path) -> None:
    """A stream and its message are still there after the server is stopped and started again on the same folder."""
    server = nats_server.start(tmp_path / "nats")
    client = await nats.connect(server.url)
    await client.jetstream().add_stream(name="KEEP", subjects=["keep.>"])
    await client.jetstream().publish("keep.x", b"1")
    await client.close()
    server.stop()
    again = nats_server.start(tmp_path / "nats", port=server.port)
    try:
        client = await nats.connect(again.url)
        info = await client.jetstream().stream_info("KEEP")
        assert info.state.messages == 1
        await client.close()
    finally:
        again.stop()


def test_a_busy_port_is_refused_with_a_fix(tmp_path: Path) -> None:
    """Starting a server on a port already in use fails with a config error suggesting ENGRAM_NATS_PORT=0."""
    server = nats_server.start(tmp_path / "a")
    try:
        with pytest.raises(ConfigError, match="ENGRAM_NATS_PORT=0"):
            nats_server.start(tmp_path / "b", port=server.port)
    finally:
        server.stop()


async def test_a_block_cancelled_while_its_server_starts_stops_the_server(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled (twice) while the thread is still starting nats-server, `running` waits for the start and stops
    the server it started, which runs in a session of its own and would otherwise outlive the process."""
    real, started, release = nats_server.start, [], threading.Event()

    def slow_start(*args: Any, **kwargs: Any) -> nats_server.EmbeddedNats:
        server = real(*args, **kwargs)
        started.append(server)
        release.wait(10)  # still "starting" while the block is cancelled
        return server

    async def block() -> None:
        async with nats_server.running(tmp_path / "nats"):
            raise AssertionError("the block must not be entered")

    monkeypatch.setattr(nats_server, "start", slow_start)
    task = asyncio.create_task(block())
    try:
        while not started:
            await asyncio.sleep(0.02)
        task.cancel()
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.sleep(0.05)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert started[0].process.poll() is not None
    finally:
        release.set()
        for server in started:  # what a failing run left behind
            server.kill()


def test_a_picked_port_taken_before_the_server_binds_it_is_picked_again(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process listens on the port picked for the server before the server binds it: the server, unable to
    bind, exits, and a connection to that port would reach the other process. `start` sees it in the server's log
    and starts it on another port, so the server it returns is its own and running."""
    stranger = socket.socket()
    stranger.bind(("127.0.0.1", 0))
    stranger.listen()
    taken = stranger.getsockname()[1]
    picks = iter([taken])
    real_free_port = nats_server.free_port
    monkeypatch.setattr(nats_server, "free_port", lambda host="127.0.0.1": next(picks, None) or real_free_port(host))
    try:
        server = nats_server.start(tmp_path / "nats")
        try:
            assert server.port != taken and server.process.poll() is None
        finally:
            server.stop()
    finally:
        stranger.close()

