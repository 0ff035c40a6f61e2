"""Forget, checked on disk as a data-protection officer would: after the receipt and the delay engram promises, no
file of any node of a 3-node JetStream cluster, nor any file of engram's data folder (the Qdrant Edge shard: payload
pages, segments, WAL), holds a byte of what the forgotten person said.

What the scan can see: the person's words carry a unique ASCII token (`ZQ7` and 26 upper-case consonants: see
tests/support/disk.py), so its bytes are the same in UTF-8, in JSON (nothing in it is escaped), in the CBOR of
Qdrant's WAL and in any lowercased index; it is looked for case-insensitively. No stream engram creates is
compressed (checked: an s2 block would hide it), the nodes have no encryption at rest, every message stays far below
the 8 KB past which nats-server compresses a raft entry, and a scan before the forget must find the token on every
node and in the shard, so the scan is not blind.
"""
import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
import pytest

from engram_client import MemoryClient, wait_until_stored
from engram_client.contract import ForgetResult, Turn
from services.stack import running
from shared.store import EntryFilter, Scope, all_entries
from tests.support.cluster import start_cluster
from tests.support.dead_letters import dead_letter_count
from tests.support.disk import Found, compressed_streams, holding, raft_groups, scan_token
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.stacks import fast_settings
from tests.support.turns import make_turn

# What engram should promise, and this test holds it to:
# - ERASED_WITHIN_S: from the receipt, no message block, key-value block, consumer state or log file of any node,
#   and no file of the Qdrant Edge shard, holds the person's words. The erase itself (secure delete by sequence,
#   the shard's vacuum and flush) belongs before the receipt; the seconds are for followers to apply the leader's
#   deletes from the raft log.
# - RAFT_LOGS_WITHIN_S: a replicated stream's raft log keeps every message it carried until the node compacts the
#   log at its next snapshot (every 2 minutes plus up to 1 minute of jitter); no API forces it short of deleting the
#   stream. A graceful stop does not stand for the timer: measured on nats-server 2.15, stopping every node 0, 11 or
#   31 s after an erase left the message in some raft logs, while every log was clean within 200 s of it. So the
#   test waits for the timer (about 2 to 3 minutes, on one worker, idle).
# The NATS nodes and the Qdrant Edge shard are judged by tests of their own, on one run of the scenario.
ERASED_WITHIN_S = 10.0
RAFT_LOGS_WITHIN_S = 180.0
RAFT_MARGIN_S = 30.0  # the time the scenario took between the streams' creation (their timers start) and the forget
STORED_WITHIN_S = 60.0
START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)


def said(speaker: str, user_id: str, conversation_id: str, i: int, text: str) -> Turn:
    """A turn of one speaker (each speaker with their own user id), a minute after the previous."""
    return make_turn(text, conversation_id=conversation_id, turn_id=f"{conversation_id}-{i}", speaker=speaker,
                     user_id=user_id, ts=START + timedelta(minutes=i))


def listing(found: list[Found]) -> str:
    """The files, one a line."""
    return "\n".join(f"  {f}" for f in found)


NODES = ("n0", "n1", "n2")
SHARD = "data"


@dataclass(frozen=True)
class Scans:
    """What one run of the scenario found: before the forget, after its receipt (within ERASED_WITHIN_S for the
    nodes; at once for the shard, whose erase is in-process), once the nodes' raft logs were clean (or
    RAFT_LOGS_WITHIN_S had passed), and after every node's stop."""

    before: list[Found]
    receipt: ForgetResult
    after_receipt: list[Found]       # raft logs left out: they are judged after the snapshot timer
    live_entries: int                # entries the store still returns that hold the token
    after_snapshots: list[Found]     # every file of the nodes, raft logs included
    raft_clean_s: float              # seconds from the receipt until no file of the nodes held the token
    after_stop: list[Found]

    def of(self, found: list[Found], places: tuple[str, ...]) -> list[Found]:
        """The files among `found` in these places."""
        return [f for f in found if f.place in places]


@pytest.fixture(scope="module")
async def scans(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Scans]:
    """A user says a unique token in windows another person opened and in their own (stored), in an open window (in
    working memory) and in a malformed turn (dead-lettered), on a 3-node JetStream cluster with every stream and
    bucket at 3 replicas; the token must be on every node and in the shard before the forget. Then the user is
    forgotten, and every file of every node and of the shard is scanned after the receipt and after the stop."""
    tmp_path = tmp_path_factory.mktemp("forget-on-disk")
    token = scan_token()
    tenant, ana, bo = unique("disk"), unique("ana"), unique("bo")
    servers = await start_cluster(tmp_path / "nats")
    nodes = {f"n{i}": server.store_dir.parent for i, server in enumerate(servers)}  # its store, config and log
    settings = fast_settings(tmp_path).model_copy(update={"nats_replicas": 3, "idle_timeout_s": 600.0})
    places = {**nodes, SHARD: settings.data_dir}
    # Bo opens a window and Ana answers with the token; Ana opens one of her own; an open window of theirs waits.
    bos_window = [said("Bo", bo, "c-bo", 0, "Ana, what is the code of the storage unit?"),
                  said("Ana", ana, "c-bo", 1, f"The code is {token}, keep it to yourself."),
                  said("Bo", bo, "c-bo", 2, "Understood, I will not share it."),
                  said("Ana", ana, "c-bo", 3, f"Write down {token} before you forget it.")]
    anas_window = [said("Ana", ana, "c-ana", 0, f"My locker at the gym has the code {token} now."),
                   said("Bo", bo, "c-ana", 1, "Good to know, thanks.")]
    open_window = [said("Bo", bo, "c-open", 0, "Are you still at the station?"),
                   said("Ana", ana, "c-open", 1, f"Yes, and the unit code {token} still works.")]
    # A turn the ingestor refuses (a field the contract does not know): dead-lettered with its body as sent.
    malformed = json.loads(said("Ana", ana, "c-bad", 0, f"Remember {token} for me.").model_dump_json())
    nc = await nats.connect(servers[0].url)
    try:
        async with (running(settings, nats_url=servers[0].url) as stack,
                    await MemoryClient.connect(servers[0].url, tenant, timeout_s=10.0) as client):
            await client.publish_turns(bos_window + anas_window)
            for conversation_id in ("c-bo", "c-ana"):
                await client.flush(conversation_id)
            await wait_until_stored(client, bos_window + anas_window, timeout_s=STORED_WITHIN_S)
            await client.publish_turns(open_window)
            wm = stack.consolidator_deps[0].places.working_memory
            await eventually(lambda: wm.held_turns(tenant),
                             lambda held: "c-open-1" in {t.turn_id for t in held.get("c-open", {}).values()})
            await nc.jetstream().publish(f"mem.{tenant}.turns", json.dumps({**malformed, "mood": "tired"}).encode())
            await eventually(lambda: dead_letter_count(servers[0].url, tenant), lambda n: n >= 1)

            assert not await compressed_streams(nc), "a compressed stream hides the token from a byte scan"
            groups = await raft_groups(nc)
            before = await eventually(lambda: asyncio.to_thread(holding, places, token, groups),
                                      lambda found: {f.place for f in found} == set(places))
            print(f"\nbefore the forget, the token is in {len(before)} files:\n{listing(before)}")

            receipt = await client.forget(user_id=ana)
            received = time.monotonic()

            def in_stores(where: dict[str, Path]) -> list[Found]:
                return [f for f in holding(where, token, groups) if not f.raft_log]

            with contextlib.suppress(AssertionError):  # judged by the tests, with what is left named
                await eventually(lambda: asyncio.to_thread(in_stores, nodes), lambda found: not found,
                                 timeout_s=ERASED_WITHIN_S, interval_s=0.5)
            after_receipt = await asyncio.to_thread(in_stores, places)
            everything = EntryFilter(include_superseded=True, include_merged=True)
            live = [e.id for e in await all_entries(stack.store, Scope(tenant_id=tenant), everything)
                    if token in e.text]
        # The nodes' own snapshot timers, which compact the raft logs: nothing engram does hurries them.
        with contextlib.suppress(AssertionError):
            await eventually(lambda: asyncio.to_thread(holding, nodes, token, groups), lambda found: not found,
                             timeout_s=RAFT_LOGS_WITHIN_S + RAFT_MARGIN_S - (time.monotonic() - received),
                             interval_s=2.0)
        raft_clean_s = time.monotonic() - received
        after_snapshots = await asyncio.to_thread(holding, nodes, token, groups)
    finally:
        await nc.close()
        for server in servers:
            server.stop()
    after_stop = await asyncio.to_thread(holding, places, token, groups)
    print(f"after the receipt:\n{listing(after_receipt)}\nafter the nodes' snapshots ({raft_clean_s:.0f} s):\n"
          f"{listing(after_snapshots)}\nafter every node's stop:\n{listing(after_stop)}")
    yield Scans(before=before, receipt=receipt, after_receipt=after_receipt, live_entries=len(live),
                after_snapshots=after_snapshots, raft_clean_s=raft_clean_s, after_stop=after_stop)


def test_the_scan_sees_the_token_everywhere_before_the_forget(scans: Scans) -> None:
    """The scan is not blind: before the forget the token is in the files of every node (the turns stream, the
    dead letters, working memory) and of the shard; and the forget's receipt says it verified its work."""
    for place in (*NODES, SHARD):
        assert scans.of(scans.before, (place,)), f"the token was never seen in {place}"
    streams_seen = {f.what.split(":")[0] for f in scans.of(scans.before, ("n0",)) if not f.raft_log}
    assert {"stream KV_MEM_WM_TURNS", "stream MEM_DLQ"} <= streams_seen, streams_seen
    assert any(s.startswith("stream MEM_TURNS_") for s in streams_seen), streams_seen
    assert scans.receipt.verified, scans.receipt


def test_a_forgotten_persons_words_leave_every_nats_node_within_seconds(scans: Scans) -> None:
    """Within ERASED_WITHIN_S of the receipt, no message block, key-value block, consumer state or log of any of the
    three nodes holds the token (the raft logs are judged after the stop)."""
    left = scans.of(scans.after_receipt, NODES)
    assert not left, (f"{ERASED_WITHIN_S:.0f} s after the receipt ({scans.receipt.deleted}), {len(left)} files of "
                      f"the NATS nodes still hold the forgotten user's token:\n{listing(left)}")


def test_a_forgotten_persons_words_leave_the_raft_logs_at_the_nodes_snapshots(scans: Scans) -> None:
    """Within RAFT_LOGS_WITHIN_S of the receipt (the nodes' snapshot timers, plus the time the scenario took after the
    streams were made), no file of any node holds the token, raft logs included; nor after the nodes stopped."""
    left = scans.of(scans.after_snapshots, NODES) + scans.of(scans.after_stop, NODES)
    assert not left, (f"{scans.raft_clean_s:.0f} s after the receipt (the server's snapshot timer runs every "
                      f"{RAFT_LOGS_WITHIN_S:.0f} s at most), files of the NATS nodes still hold the token:\n"
                      f"{listing(left)}")


def test_a_forgotten_persons_words_leave_every_file_of_the_shard(scans: Scans) -> None:
    """At the receipt no entry the store returns holds the token, and no file of the Qdrant Edge shard (payload
    pages, indexes, WAL) holds it, then or after the stack stopped."""
    assert scans.live_entries == 0, f"{scans.live_entries} entries the store still returns hold the token"
    left = scans.of(scans.after_receipt, (SHARD,)) + scans.of(scans.after_stop, (SHARD,))
    assert not left, f"files of the shard still hold the forgotten user's token:\n{listing(left)}"
