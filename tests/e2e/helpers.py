"""Helpers for end-to-end tests: storing turns, dead letters, stored entries, raw publishes, a NATS cluster."""
import asyncio
from pathlib import Path
from typing import Any

import nats
from nats.errors import TimeoutError as NatsTimeout

from engram_client import MemoryClient, wait_until_stored
from engram_client.contract import EntryView, Turn
from shared.messaging import nats_server
from shared.messaging.nats_server import EmbeddedNats, free_port
from shared.store import EntryFilter, Scope, Store


async def dead_letters(nats_url: str, tenant: str, expect: int = 1, timeout_s: float = 15.0) -> list[Any]:
    """The messages dead-lettered for a tenant (waits until at least `expect` are there)."""
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    sub = await js.pull_subscribe(f"mem.dlq.{tenant}.>", durable=None)
    found: list[Any] = []
    try:
        import time

        deadline = time.monotonic() + timeout_s
        while len(found) < expect and time.monotonic() < deadline:
            try:
                found += await sub.fetch(expect - len(found), timeout=1)
            except (NatsTimeout, TimeoutError):
                continue
    finally:
        await sub.unsubscribe()
        await nc.close()
    return found


async def stored_turn_ids(store: Store, tenant: str) -> list[str]:
    """Every source turn id of every episode of a tenant (with repeats, so duplicates show; facts restate turns
    an episode already holds)."""
    ids: list[str] = []
    offset = None
    while True:
        page = await store.scroll(Scope(tenant_id=tenant), entry_filter=EntryFilter(kinds=["episodic"]), limit=256,
                                  offset=offset)
        ids += [t for e in page.entries for t in e.source_turn_ids]
        if page.next_offset is None:
            return ids
        offset = page.next_offset


async def dead_letter_count(nats_url: str, tenant: str) -> int:
    """How many messages of a tenant are in the dead-letter stream right now."""
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().stream_info("MEM_DLQ", subjects_filter=f"mem.dlq.{tenant}.>")
    finally:
        await nc.close()
    return sum((info.state.subjects or {}).values())


def memory_without_ids(views: list[EntryView]) -> list[tuple[Any, ...]]:
    """A tenant's memory without its ids (which embed the tenant), for comparing two tenants given the same turns:
    each entry's kind, text, sources, importance, and the texts of what superseded it or it was merged into."""
    by_id = {v.id: v for v in views}

    def text_of(entry_id: str | None) -> str | None:
        return by_id[entry_id].text if entry_id in by_id else entry_id

    return sorted((v.kind, v.text, tuple(v.source_turn_ids), text_of(v.superseded_by), text_of(v.merged_into),
                   v.importance) for v in views)


async def store_all(client: MemoryClient, turns: list[Turn], timeout_s: float = 60.0) -> None:
    """Publish the turns, flush each of their conversations, and wait until every turn is stored."""
    await client.publish_turns(turns)
    for conversation_id in dict.fromkeys(t.conversation_id for t in turns):
        await client.flush(conversation_id)
    await wait_until_stored(client, turns, timeout_s=timeout_s)


async def start_cluster(folder: Path, size: int = 3, name: str = "engram") -> list[EmbeddedNats]:
    """`size` nats-servers from the wheel as one JetStream cluster on loopback (node i is `n<i>`, storing in
    folder/n<i>), once its JetStream answers (a meta leader is elected)."""
    route_ports = [free_port() for _ in range(size)]
    routes = ", ".join(f'"nats-route://127.0.0.1:{port}"' for port in route_ports)
    configs: list[Path] = []
    for i, route_port in enumerate(route_ports):
        (folder / f"n{i}").mkdir(parents=True)
        configs.append(folder / f"n{i}" / "nats.conf")
        # JetStream in a cluster needs each server named; the store folder comes from nats_server.start.
        configs[-1].write_text(f"server_name: n{i}\ncluster {{\n  name: {name}\n  listen: 127.0.0.1:{route_port}\n"
                               f"  routes: [{routes}]\n}}\n")
    servers = list(await asyncio.gather(*(asyncio.to_thread(nats_server.start, config.parent / "jetstream",
                                                            config=config) for config in configs)))
    nc = await nats.connect(servers[0].url)
    try:
        for _ in range(300):  # no meta leader yet: JetStream's API does not answer (or answers 503)
            try:
                await nc.jetstream().account_info()
                break
            except Exception:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"the {size}-node cluster's JetStream never answered; logs in {folder}")
    finally:
        await nc.close()
    return servers
