"""The embedded nats-server launcher: JetStream on a free port, store in a temp folder, clean stop."""
from pathlib import Path

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
