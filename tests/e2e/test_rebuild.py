"""`engram rebuild`: the memory derived again from the retained turns, with a new window size, while recall answers.

Real nats-server, the three services, Qdrant Edge; the switch is a folder switch, and a restart opens the new build.
"""
import asyncio
from collections import Counter
from pathlib import Path

import nats
import pytest

from engram_client import MemoryClient, wait_until_stored
from engram_client.contract import RecallResponse, Turn
from engram_client.errors import InvalidRequest
from services.stack import running
from shared.errors import ConfigError
from shared.messaging import nats_server
from shared.settings import Settings
from shared.store import EntryFilter, Scope, Store, all_entries, builds
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.stacks import fast_settings
from tests.support.turns import conversation


async def _episodes(store: Store, tenant: str) -> list[list[str]]:
    return [e.source_turn_ids for e in await all_entries(store, Scope(tenant_id=tenant),
                                                         EntryFilter(kinds=["episodic"], include_merged=False))]


LINES = ["I planted {t} seeds by the old oak fence on Monday.", "My sister Clara from Lyon phoned about {t} again.",
         "The bank approved the loan for a new {t} shed.", "Our dog Pixel chewed the {t} manual to pieces.",
         "Tomorrow I fly to Osaka for a {t} conference.", "The doctor said my knee needs rest, so no {t} for a while.",
         "We painted the kitchen yellow while talking about {t}.", "My {t} club elected a new treasurer, Marco."]


def _chat(name: str, topic: str, n: int) -> list[Turn]:
    return conversation([("Ana" if i % 2 == 0 else "Ben", LINES[i % len(LINES)].format(t=topic))
                         for i in range(n)], conversation_id=name)


async def _recall_until(client: MemoryClient, done: asyncio.Event, replies: list[RecallResponse | Exception]) -> None:
    while not done.is_set():
        try:
            replies.append(await client.recall("What notes does Ana keep about gardening?", k=3))
        except Exception as exc:  # counted, and the test fails on it
            replies.append(exc)
        await asyncio.sleep(0.02)


async def test_a_rebuild_with_a_new_window_size_switches_while_recall_answers(tmp_path: Path) -> None:
    """A rebuild with a new window size re-derives every tenant's episodes from the retained turns while recall keeps
    answering, refuses an existing build name, leaves out forgotten users, and survives a restart."""
    settings: Settings = fast_settings(tmp_path).model_copy(update={"window_turns": 2, "idle_timeout_s": 60.0})
    tenant, other = unique("rb"), unique("rb")
    gardening, cooking = _chat("garden", "gardening", 8), _chat("kitchen", "cooking", 8)
    # In working memory during the rebuild: the ingestor writes it.
    waiting = conversation([("Ana", "Sailing lessons start in June at the harbour in Brest.")], conversation_id="later")
    server = nats_server.start(tmp_path / "nats")
    try:
        async with running(settings, nats_url=server.url) as state, \
                await MemoryClient.connect(state.nats_url, tenant) as client, \
                await MemoryClient.connect(state.nats_url, other) as second:
            await client.publish_turns(gardening)
            await second.publish_turns(cooking)
            await client.flush("garden")
            await second.flush("kitchen")
            await wait_until_stored(client, gardening, timeout_s=60)
            await wait_until_stored(second, cooking, timeout_s=60)
            assert sorted(len(e) for e in await _episodes(state.store, tenant)) == [2, 2, 2, 2]
            await client.publish_turns(waiting)
            wm = state.ingestor_deps[0].working_memory
            await eventually(lambda: wm.get(tenant, "later"), lambda b: b is not None and len(b.open) == 1)

            done, replies = asyncio.Event(), []  # type: ignore[var-annotated]
            recalling = asyncio.create_task(_recall_until(client, done, replies))
            report = await client.rebuild("v2", window_turns=4, timeout_s=120)
            done.set()
            await recalling

            assert report.into == "v2" and report.window_turns == 4
            assert report.turns_replayed == 16 and report.turns_left_to_live == 1 and report.windows == 4
            errors = [r for r in replies if isinstance(r, Exception)]
            print(f"rebuild v2: {report.seconds:.2f}s, {len(replies)} recalls meanwhile, {len(errors)} errors")
            assert not errors and len(replies) >= 5, errors[:3]
            assert all(r.entries for r in replies if isinstance(r, RecallResponse))
            # Afterwards recall reads the new build: windows of four turns, every turn in exactly one episode.
            for who, turns in ((tenant, gardening), (other, cooking)):
                episodes = await _episodes(state.store, who)
                assert sorted(len(e) for e in episodes) == [4, 4]
                assert Counter(t for e in episodes for t in e) == Counter(t.turn_id for t in turns)
            hits = (await client.recall("gardening notes", k=5)).entries
            assert hits and all(len(h.source_turn_ids) == 4 for h in hits if h.kind == "episodic")
            # The turns that waited in working memory land in the new build once their window closes.
            await client.flush("later")
            await wait_until_stored(client, waiting, timeout_s=60)
            assert sorted(len(e) for e in await _episodes(state.store, tenant)) == [1, 4, 4]
            with pytest.raises(InvalidRequest, match="already exists"):
                await client.rebuild("v2", timeout_s=60)
            # forget reaches the retained turns: a rebuild cannot bring the person back.
            await second.forget(user_id=cooking[0].user_id)
            # ... nor a rollback: the build v2 replaced is deleted with the forget, and rolling back is refused.
            assert not Path(settings.qdrant_path).exists()
            again = await client.rebuild("v3", timeout_s=120)
            assert again.window_turns == settings.window_turns
            assert await _episodes(state.store, other) == []
        async with running(settings, nats_url=server.url) as restarted:  # the pointer names the live build
            assert sorted(len(e) for e in await _episodes(restarted.store, tenant)) == [1, 2, 2, 2, 2]
        Path(settings.qdrant_path).with_name("qdrant.live").unlink()  # a rollback to the first build
        with pytest.raises(ConfigError, match="rollback across a forget is refused"):
            async with running(settings, nats_url=server.url):
                pass
    finally:
        server.stop()


@pytest.mark.parametrize("expired", [4, 3], ids=["at-a-window-edge", "inside-a-window"])
async def test_memories_whose_turns_expired_are_carried_over_whole(tmp_path: Path, expired: int) -> None:
    """The oldest turns gone from the stream, as retention does: their episodes are carried over as they were
    (also one whose first turn is gone and second is not), the rest re-derived, every turn in one episode."""
    settings: Settings = fast_settings(tmp_path).model_copy(update={"window_turns": 2, "idle_timeout_s": 60.0})
    tenant = unique("rb")
    gardening = _chat("garden", "gardening", 8)
    server = nats_server.start(tmp_path / "nats")
    try:
        async with running(settings, nats_url=server.url) as state, \
                await MemoryClient.connect(state.nats_url, tenant) as client:
            seqs = await client.publish_turns(gardening)
            await client.flush("garden")
            await wait_until_stored(client, gardening, timeout_s=60)
            nc = await nats.connect(state.nats_url)
            try:
                for seq in seqs[:expired]:
                    await nc.jetstream().delete_msg(f"MEM_TURNS_{tenant}", seq)
            finally:
                await nc.close()
            report = await client.rebuild("v2", window_turns=4, timeout_s=120)
            assert report.turns_replayed == 4 and report.windows == 1 and report.entries_carried >= 2
            assert report.turns_left_to_live == 4 - expired
            episodes = await _episodes(state.store, tenant)
            assert sorted(len(e) for e in episodes) == [2, 2, 4]
            assert Counter(t for e in episodes for t in e) == Counter(t.turn_id for t in gardening)
            # A memory forgotten by id takes its turns out of the stream: no rebuild derives it again.
            [latest] = [e for e in await all_entries(state.store, Scope(tenant_id=tenant),
                                                     EntryFilter(kinds=["episodic"])) if len(e.source_turn_ids) == 4]
            assert (await client.forget(entry_ids=[latest.id])).verified
            await client.rebuild("v3", timeout_s=120)
            left = {t for e in await _episodes(state.store, tenant) for t in e}
            assert left == {t.turn_id for t in gardening} - set(latest.source_turn_ids)
    finally:
        server.stop()


async def test_a_rebuild_under_traffic_loses_and_repeats_no_turn_and_forgets_reach_it(tmp_path: Path) -> None:
    """Turns keep arriving, a message of the stream names another tenant, and a forget is answered (by either of
    two consolidators) while the rebuild runs."""
    settings: Settings = fast_settings(tmp_path).model_copy(update={"window_turns": 2, "idle_timeout_s": 60.0})
    tenant = unique("rb")
    before = [t for i in range(6) for t in _chat(f"c{i}", f"hobby{i}", 6)]
    doomed = conversation([("Zoe", "My passport number is X1234567 and I live on Rue Cler.")], conversation_id="z",
                          user_id="zoe")
    server = nats_server.start(tmp_path / "nats")
    try:
        async with running(settings, nats_url=server.url, consolidators=2) as state, \
                await MemoryClient.connect(state.nats_url, tenant) as client:
            await client.publish_turns([*before, *doomed])
            for i in range(6):
                await client.flush(f"c{i}")
            await client.flush("z")
            await wait_until_stored(client, [*before, *doomed], timeout_s=120)
            nc = await nats.connect(state.nats_url)
            try:  # a turn whose body names another tenant: dead-lettered, and still in the stream
                await nc.publish(f"mem.{tenant}.turns", conversation([("Eve", "hi")], conversation_id="e")[0]
                                 .model_copy(update={"tenant_id": "someone-else"}).model_dump_json().encode())
                await nc.flush()
            finally:
                await nc.close()
            during: list[Turn] = []

            async def keep_talking() -> None:
                for i in range(12):
                    turn = conversation([("Ana", f"Live note {i}: the lighthouse keeper waved at {i} boats.")],
                                        conversation_id="live")[0].model_copy(update={"turn_id": f"live-{i}"})
                    await client.publish_turn(turn)
                    during.append(turn)
                    await asyncio.sleep(0.15)

            talking = asyncio.create_task(keep_talking())
            rebuilding = asyncio.create_task(client.rebuild("v2", window_turns=3, timeout_s=120))
            # The rebuild listens for forgets before it opens its build's folder: once the folder is there, a forget
            # answered now lands during the rebuild, and must reach the new build too.
            await eventually(lambda: (builds.edge_builds(settings) / "v2").exists() or rebuilding.done(),
                             timeout_s=60, interval_s=0.02)
            assert not rebuilding.done(), rebuilding
            receipt = await client.forget(user_id="zoe")
            report = await rebuilding
            await talking
            await client.flush("live")
            await wait_until_stored(client, [*before, *during], timeout_s=120)
            assert receipt.verified and report.unreadable >= 1 and report.forgets_applied_again >= 1
            episodes = await _episodes(state.store, tenant)
            counts = Counter(t for e in episodes for t in e)
            assert counts == Counter(t.turn_id for t in [*before, *during])  # none lost, none twice, zoe gone
            again = await client.rebuild("v3", timeout_s=120)
            assert again.turns_replayed == len(before) + len(during)
            assert Counter(t for e in await _episodes(state.store, tenant) for t in e) == counts
    finally:
        server.stop()
