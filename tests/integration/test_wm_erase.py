"""Working memory erases people's words from the server's files, not only from its index: each way a turn's text or
a summary leaves working memory (a window written, a summary replaced, a forget of a conversation, of a user's turns,
of their summaries, a turn stored again) is checked by scanning every file of a real nats-server's store for a
unique token, which must be there before and gone after. A bucket an older engram made (deletes denied) keeps
working and is reported."""
import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from nats.aio.client import Client
from nats.js.api import KeyValueConfig

from engram_client import connection
from engram_client.contract import Flush
from shared.ingest.accept import accept_flush, accept_turn
from shared.ingest.policy import WindowPolicy
from shared.messaging import nats_server, streams
from shared.working_memory import CachedSummary, WorkingMemory
from shared.working_memory import buckets as working_memory
from shared.working_memory import buffer as buffers
from tests.support.disk import Found, holding
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.turns import make_turn

POLICY = WindowPolicy(window_turns=4, recent_turns=0, max_pending_windows=32)  # no recent turn keeps a text


@dataclass
class Server:
    """A nats-server, its store folder, and working memory over one connection to it."""

    store: Path
    nc: Client
    wm: WorkingMemory


@pytest.fixture(scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Server]:
    """One nats-server for the module (each test has its own tenant and tokens)."""
    store = tmp_path_factory.mktemp("erase") / "nats"
    process = nats_server.start(store)
    nc = await connection.connect(process.url, "erase")
    yield Server(store, nc, await WorkingMemory.open(nc.jetstream(), "mem", ttl_s=3600))
    await nc.close()
    process.stop()


def token() -> str:
    """A unique ASCII string to find on disk (the same bytes in JSON)."""
    return f"zq7-{uuid.uuid4().hex}"


async def on_disk(server: Server, needle: str) -> list[Found]:
    """The files of the server's store that hold `needle`, once the server has written it (it may still be in the
    block's cache for a moment)."""
    return await eventually(lambda: asyncio.to_thread(holding, {"nats": server.store}, needle), timeout_s=10.0)


def left(server: Server, needle: str) -> list[Found]:
    """The files of the server's store that hold `needle` now."""
    return holding({"nats": server.store}, needle)


async def test_the_texts_of_a_written_window_are_erased(server: Server) -> None:
    """A window closed, written and completed: its turns' texts leave the turns bucket's files, but for its last
    turn's, which the next window quotes as context."""
    wm, tenant, said = server.wm, unique("t"), [token() for _ in range(4)]
    for i in range(4):
        await accept_turn(wm, tenant=tenant, turn=make_turn(f"turn {i}: {said[i]}", conversation_id="c1"), seq=i + 1,
                          policy=POLICY)
    sealed = await wm.get(tenant, "c1")
    assert sealed is not None and [w.seqs for w in sealed.sealed] == [[1, 2, 3, 4]]
    for needle in said:
        assert {f.path.split("/")[-3] for f in await on_disk(server, needle)} == {"KV_MEM_WM_TURNS"}
    await wm.update(tenant, "c1", lambda b: (buffers.complete(b, [1, 2, 3, 4]) if b else None, None))
    assert set(await wm.turns(tenant, "c1", [1, 2, 3, 4])) == {4}
    assert [bool(left(server, needle)) for needle in said] == [False, False, False, True]


async def test_a_flushed_window_keeps_its_texts_until_written(server: Server) -> None:
    """Erasing is not eager: a sealed window not yet written keeps its texts (the scan sees them)."""
    wm, tenant, said = server.wm, unique("t"), token()
    await accept_turn(wm, tenant=tenant, turn=make_turn(said, conversation_id="c1"), seq=1, policy=POLICY)
    await accept_flush(wm, tenant=tenant, flush=Flush(conversation_id="c1"), seq=2)
    assert await on_disk(server, said)
    assert set(await wm.turns(tenant, "c1", [1])) == {1}


async def test_a_summary_written_over_is_erased(server: Server) -> None:
    """A new running summary erases the one it replaces; the new one is read back."""
    wm, tenant, older, newer = server.wm, unique("t"), token(), token()
    await wm.put_summary(tenant, "c1", CachedSummary(through_turn_id="t1", text=older, source="extractive"))
    assert await on_disk(server, older)
    await wm.put_summary(tenant, "c1", CachedSummary(through_turn_id="t2", text=newer, source="model"))
    assert not left(server, older)
    summary = await wm.summary(tenant, "c1")
    assert summary is not None and summary.text == newer
    assert await on_disk(server, newer)


async def test_forgetting_summaries_erases_every_revision(server: Server) -> None:
    """Forgetting a conversation's summary, or a user's, erases it (and any revision a race left) from the files;
    another user's summary stays."""
    wm, tenant = server.wm, unique("t")
    mine, by_user, other = token(), token(), token()
    await wm.put_summary(tenant, "c1", CachedSummary(through_turn_id="t1", text=mine, source="extractive"))
    await wm.put_summary(tenant, "c2", CachedSummary(through_turn_id="t1", text=by_user, source="extractive",
                                                     user_ids=["ana"]))
    await wm.put_summary(tenant, "c3", CachedSummary(through_turn_id="t1", text=other, source="extractive",
                                                     user_ids=["bo"]))
    for needle in (mine, by_user, other):
        assert await on_disk(server, needle)
    assert await wm.forget_summaries(tenant, conversation_id="c1") == 1
    assert await wm.forget_summaries(tenant, user_id="ana") == 1
    assert not left(server, mine) and not left(server, by_user)
    assert await wm.summary(tenant, "c1") is None and await wm.summary(tenant, "c2") is None
    assert left(server, other)
    assert await wm.forget_summaries(tenant, conversation_id="c1") == 0  # forgotten already: no error


async def test_forgetting_a_conversation_erases_its_texts(server: Server) -> None:
    """forget_conversation erases every text of the conversation, open or sealed, and says how many."""
    wm, tenant, said = server.wm, unique("t"), token()
    for i in range(6):  # a sealed window and two open turns
        await accept_turn(wm, tenant=tenant, turn=make_turn(f"{said} {i}", conversation_id="c1"), seq=i + 1,
                          policy=POLICY)
    assert await on_disk(server, said)
    assert await wm.forget_conversation(tenant, "c1") == (1, 6)
    assert not left(server, said)
    assert await wm.get(tenant, "c1") is None and await wm.text_count(tenant, "c1") == 0


async def test_forgetting_a_users_turns_erases_theirs_and_keeps_the_others(server: Server) -> None:
    """forget_turns_of takes one person's turns out of a shared conversation: their texts leave the files, the
    other person's stay and are still referred to."""
    wm, tenant, hers, his = server.wm, unique("t"), token(), token()
    for i in range(3):
        ana = i % 2 == 0
        await accept_turn(wm, tenant=tenant, turn=make_turn(f"{hers if ana else his} {i}", conversation_id="c1",
                                                            user_id="ana" if ana else "bo"), seq=i + 1, policy=POLICY)
    assert await on_disk(server, hers) and await on_disk(server, his)
    after = await wm.forget_turns_of(tenant, "c1", {1, 3})
    assert after is not None and after.open == [2]
    assert not left(server, hers)
    assert left(server, his) and set(await wm.turns(tenant, "c1", [1, 2, 3])) == {2}


async def test_erasing_texts_that_are_gone_already_is_no_error(server: Server) -> None:
    """forget_turns of texts never stored, or erased already (another replica's forget, a race), does nothing."""
    wm, tenant, said = server.wm, unique("t"), token()
    await accept_turn(wm, tenant=tenant, turn=make_turn(said, conversation_id="c1"), seq=1, policy=POLICY)
    await asyncio.gather(wm.forget_turns(tenant, "c1", [1, 2, 3]), wm.forget_turns(tenant, "c1", [1]))
    await wm.forget_turns(tenant, "c1", [1])
    assert not left(server, said) and await wm.turns(tenant, "c1", [1]) == {}


async def test_a_turn_stored_again_leaves_no_older_value(server: Server) -> None:
    """Storing a turn's text again (a redelivery) writes nothing when it is the same; a different value under its
    key (one engram did not write) is erased, not pushed out, when the turn's text replaces it."""
    wm, tenant, said, stray = server.wm, unique("t"), token(), token()
    turn = make_turn(said, conversation_id="c1")
    await wm.put_turn(tenant, turn, 7)
    await wm.put_turn(tenant, turn, 7)
    entries = await streams.kv_entries(server.nc.jetstream(), working_memory.bucket_names("mem")[1], f"{tenant}.>")
    assert len(entries) == 1
    await wm.turn_texts.put(working_memory.turn_key(tenant, "c2", 8), stray.encode())
    assert await on_disk(server, stray)
    await wm.put_turn(tenant, make_turn(said, conversation_id="c2"), 8)
    assert not left(server, stray)
    assert (await wm.turns(tenant, "c2", [8]))[8].text == said


async def test_buckets_an_older_engram_made_keep_working_and_are_reported(
        server: Server, caplog: pytest.LogCaptureFixture) -> None:
    """Turn and summary buckets made with deletes denied (as nats-py makes a bucket) cannot erase: working memory
    still stores and forgets through them (a purge), names them in `unerasable` and warns how to make them again."""
    js = server.nc.jetstream()
    prefix = unique("old").replace("-", "_")
    _, turns, _ = working_memory.bucket_names(prefix)
    summaries = working_memory.summaries_bucket_name(prefix)
    for bucket in (turns, summaries):
        await js.create_key_value(KeyValueConfig(bucket=bucket, history=1, limit_marker_ttl=60.0))
    with caplog.at_level(logging.WARNING, logger="engram.working_memory"):
        wm = await WorkingMemory.open(js, prefix)
    assert wm.unerasable == (turns, summaries)
    assert all(any(b in r.getMessage() and "nats kv del" in r.getMessage() for r in caplog.records)
               for b in (turns, summaries))
    tenant = unique("t")
    await accept_turn(wm, tenant=tenant, turn=make_turn("hello", conversation_id="c1"), seq=1, policy=POLICY)
    await wm.put_summary(tenant, "c1", CachedSummary(through_turn_id="t1", text="one", source="extractive"))
    await wm.put_summary(tenant, "c1", CachedSummary(through_turn_id="t2", text="two", source="extractive"))
    assert await wm.forget_conversation(tenant, "c1") == (1, 1)
    assert await wm.forget_summaries(tenant, conversation_id="c1") == 1
    assert await wm.turns(tenant, "c1", [1]) == {} and await wm.summary(tenant, "c1") is None
    assert server.wm.unerasable == ()
