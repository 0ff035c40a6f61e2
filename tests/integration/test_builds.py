"""Builds on a Qdrant server: ENGRAM_COLLECTION is an alias, a new build is a collection of its own, and the switch
moves the alias in one request. Run with qdrant-client's local mode standing in for the server (same calls)."""
from collections.abc import Iterator
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from shared.errors import ConfigError
from shared.settings import Settings
from shared.store import ClientStore, EdgeStore, Scope, builds
from tests.support.store import item

DIM = 4


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[AsyncQdrantClient]:
    client = AsyncQdrantClient(location=":memory:")
    monkeypatch.setattr(builds, "server_client", lambda settings: client)
    yield client


async def test_the_switch_moves_the_alias_and_every_reader_follows(server: AsyncQdrantClient) -> None:
    """On a Qdrant server, readers of the alias see a new build only after the switch, also after a restart; a
    repeated or badly named build is refused."""
    settings = Settings(qdrant_url="http://qdrant.test:6333")
    live = await builds.open_live(settings, DIM)
    assert {a.alias_name: a.collection_name for a in (await server.get_aliases()).aliases} == {
        "engram_memory": "engram_memory-initial"}
    tenant = "t1"
    await live.upsert([item(tenant, ["a"], dense=[1, 0, 0, 0], terms=[1])])
    old = await builds.current(settings, live)
    assert isinstance(old, ClientStore) and await old.count(Scope(tenant_id=tenant)) == 1
    built = await builds.open_build(settings, "v2", DIM)
    await built.upsert([item(tenant, ["b"], dense=[0, 1, 0, 0], terms=[2]),
                        item(tenant, ["c"], dense=[0, 0, 1, 0], terms=[3])])
    assert await live.count(Scope(tenant_id=tenant)) == 1  # nothing changes for readers until the switch
    assert await builds.switch(settings, live, "v2", built) == "engram_memory-initial"
    assert await live.count(Scope(tenant_id=tenant)) == 2
    assert await (await builds.open_live(settings, DIM)).count(Scope(tenant_id=tenant)) == 2  # a restart too
    with pytest.raises(ConfigError, match="already exists"):
        await builds.open_build(settings, "v2", DIM)
    with pytest.raises(ConfigError, match="must be 1-64"):
        await builds.open_build(settings, "v2.bad", DIM)


async def test_a_collection_that_is_no_alias_cannot_be_switched(server: AsyncQdrantClient) -> None:
    """A live collection that is a plain collection rather than an alias refuses new builds and current() with a
    config error saying so."""
    settings = Settings(qdrant_url="http://qdrant.test:6333", collection="legacy")
    await ClientStore.open(server, "legacy", DIM)  # made by an engram before builds existed
    live = await builds.open_live(settings, DIM)
    assert (await server.get_aliases()).aliases == []
    with pytest.raises(ConfigError, match="not an alias"):
        await builds.open_build(settings, "v2", DIM)
    with pytest.raises(ConfigError, match="not an alias"):
        await builds.current(settings, live)


async def test_on_edge_a_pointer_names_the_live_folder(tmp_path: Path) -> None:
    """On Qdrant Edge the switch points the live store and later reopens at the new build's folder, while a store
    opened before keeps the old data."""
    settings = Settings(data_dir=tmp_path)
    live = await builds.open_live(settings, DIM)
    assert isinstance(live, EdgeStore) and builds.live_edge_path(settings) == settings.qdrant_path
    await live.upsert([item("t1", ["a"], dense=[1, 0, 0, 0], terms=[1])])
    before = await builds.current(settings, live)
    built = await builds.open_build(settings, "v2", DIM)
    await built.upsert([item("t1", ["b"], dense=[0, 1, 0, 0], terms=[2]), item("t1", ["c"], dense=[0, 0, 1, 0],
                                                                              terms=[3])])
    await builds.switch(settings, live, "v2", built)
    assert await live.count(Scope(tenant_id="t1")) == 2 and await before.count(Scope(tenant_id="t1")) == 1
    assert builds.live_edge_path(settings) == tmp_path / "qdrant-builds" / "v2"
    await live.close()
    reopened = await builds.open_live(settings, DIM)
    try:
        assert await reopened.count(Scope(tenant_id="t1")) == 2
    finally:
        await reopened.close()
