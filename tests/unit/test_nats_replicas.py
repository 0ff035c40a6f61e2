"""How many replicas engram gives its streams and buckets, and how a client picks a server to reconnect to."""
from dataclasses import dataclass

import pytest

from engram_client import connection as client_connection
from shared.errors import ConfigError
from shared.messaging import streams
from shared.settings import Settings

SINGLE = {"server_name": "solo", "jetstream": True}
CLUSTER = {"server_name": "n0", "cluster": "engram", "connect_urls": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]}


def test_unset_replicas_are_what_the_server_allows() -> None:
    """Unset: 1 on a single server, 3 on a cluster."""
    assert Settings().nats_replicas is None
    assert streams.replicas(SINGLE, None) == 1
    assert streams.replicas(CLUSTER, None) == 3


def test_the_nats_url_may_list_a_clusters_servers() -> None:
    """ENGRAM_NATS_URL takes several servers separated by commas, each with its scheme."""
    url = "nats://nats-1:4222, nats://nats-2:4222,nats://nats-3:4222"
    assert Settings(nats_url=url).nats_url == url
    assert client_connection.server_urls(url) == ["nats://nats-1:4222", "nats://nats-2:4222", "nats://nats-3:4222"]
    with pytest.raises(ValueError, match=r"use e\.g\. nats://nats-2:4222"):
        Settings(nats_url="nats://nats-1:4222,nats-2:4222")


def test_set_replicas_are_used_and_refused_by_a_single_server_with_a_fix() -> None:
    """ENGRAM_NATS_REPLICAS wins; more than 1 on a server outside a cluster stops start-up saying what to do."""
    assert streams.replicas(CLUSTER, 5) == 5
    assert streams.replicas(SINGLE, 1) == 1
    with pytest.raises(ConfigError, match=r"ENGRAM_NATS_REPLICAS=3 .*'solo' is not part of a cluster"):
        streams.replicas(SINGLE, 3)


def test_replicas_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """JetStream allows 1 to 5 replicas."""
    monkeypatch.setenv("ENGRAM_NATS_REPLICAS", "3")
    assert Settings().nats_replicas == 3
    monkeypatch.setenv("ENGRAM_NATS_REPLICAS", "7")
    with pytest.raises(ValueError, match="nats_replicas"):
        Settings()


@dataclass
class Server:
    """What nats-py hands the reconnect hook for each server of the pool."""

    uri: str
    reconnects: int


def test_reconnecting_moves_to_a_server_that_has_failed_least() -> None:
    """A client whose server died tries the cluster's other servers, never only the first of its pool."""
    pool = [Server("n0", 3), Server("n1", 0), Server("n2", 1)]
    assert {client_connection.choose_server(pool, {})[0].uri for _ in range(50)} == {"n1"}
    even = [Server("n0", 0), Server("n1", 0)]
    assert {client_connection.choose_server(even, {})[0].uri for _ in range(200)} == {"n0", "n1"}
    chosen, delay_s = client_connection.choose_server([Server("solo", 4)], {})
    assert chosen.uri == "solo" and 0 < delay_s <= client_connection.RECONNECT_CAP_S
