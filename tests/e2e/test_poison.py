"""A window that kills its ingestor every time it is written: its attempts, counted in working memory before each
one, tell every replica and every restart so; past ENGRAM_MAX_DELIVER it is stored as plain lines (the part that
killed the writer never runs again), and every other window is stored as usual.

The fault is the test's own: a `sitecustomize` module on the ingestor processes' PYTHONPATH wraps the writer so
that building a window holding a marker (not as plain lines) ends the process at once, as a crash in native code
would. engram's code carries no hook for it.
"""
import os
import signal
import subprocess
import sys
from pathlib import Path

import nats
from nats.js.errors import NotFoundError

from engram_client import MemoryClient
from shared.messaging import streams
from shared.store import EdgeStore, EntryFilter, Scope, all_entries
from shared.working_memory import WorkingMemory
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.turns import conversation

MARKER = "POISON-7f3a9"
MAX_DELIVER = 2
FAULT = f'''
import os
from shared.ingest import writer

_build = writer.build


async def build(w, windows, now=None, plain=False):
    if not plain and any({MARKER!r} in turn.text for window in windows for turn in window.turns):
        os._exit(137)  # the process dies mid-write, as a crash in native code would
    return await _build(w, windows, now, plain)


writer.build = build
'''
ROOT = Path(__file__).parents[2]


def start_ingestor(nats_url: str, data_dir: Path, fault: Path, log: Path) -> subprocess.Popen[bytes]:
    """An ingestor process of its own (its own Qdrant Edge folder), the fault on its path."""
    env = {**os.environ, "ENGRAM_NATS_URL": nats_url, "ENGRAM_DATA_DIR": str(data_dir), "ENGRAM_HTTP_PORT": "0",
           "ENGRAM_SEAL_GRACE_S": "1", "ENGRAM_ACK_WAIT_S": "2", "ENGRAM_SWEEP_INTERVAL_S": "0.2",
           "ENGRAM_IDLE_TIMEOUT_S": "600", "ENGRAM_MAX_DELIVER": str(MAX_DELIVER),
           "PYTHONPATH": os.pathsep.join([str(fault), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "services.cli", "ingestor"], env=env, stdout=out,
                                stderr=subprocess.STDOUT)


async def test_a_window_that_kills_its_writer_every_time_is_stored_plain_across_restarts_and_replicas(
        nats_url: str, tmp_path: Path) -> None:
    """Two ingestor replicas, each restarted whenever it dies: the poisoned window kills whichever writes it until
    its cut-short attempts pass max_deliver; then it is stored as plain lines (its text whole, no derived facts),
    and the two other conversations' windows are stored as usual: every turn in exactly one episode."""
    tenant = unique("poison")
    fault = tmp_path / "fault"
    fault.mkdir()
    (fault / "sitecustomize.py").write_text(FAULT)
    replicas = [tmp_path / "replica-a", tmp_path / "replica-b"]
    log = tmp_path / "ingestors.log"
    poisoned = conversation([("Ana", f"My locker code is {MARKER} and I keep forgetting it."),
                             ("Bo", "Write it down somewhere safe."), ("Ana", "I moved to Porto in May."),
                             ("Bo", "Porto is lovely.")], conversation_id="poisoned")
    others = [t for c in ("calm-1", "calm-2") for t in conversation(
        [("Ana", f"In {c} we planned a trip to Lisbon."), ("Bo", "Lisbon in spring!"),
         ("Ana", "I booked the train."), ("Bo", "Great.")], conversation_id=c)]
    nc = await nats.connect(nats_url)
    processes: dict[int, subprocess.Popen[bytes]] = {}
    deaths = 0
    try:
        # The tenant's stream made up front, as `engram tenants add` does: turns wait there for the first ingestor.
        await streams.ensure_tenant(nc.jetstream(), "mem", tenant, streams.TurnsLimits())
        processes[0] = start_ingestor(nats_url, replicas[0], fault, log)
        async with await MemoryClient.connect(nats_url, tenant, timeout_s=30) as client:
            await client.publish_turns(poisoned + others)
            for conversation_id in ("poisoned", "calm-1", "calm-2"):
                await client.flush(conversation_id)
        wm = await WorkingMemory.open(nc.jetstream(), "mem")

        async def settled() -> bool:
            nonlocal deaths
            for i, replica in enumerate(replicas):  # a dead replica comes back, the other one starts too
                proc = processes.get(i)
                if proc is None or proc.poll() is not None:
                    if proc is not None and proc.returncode == 137:
                        deaths += 1
                    processes[i] = start_ingestor(nats_url, replica, fault, log)
            try:  # every turn and flush taken into working memory...
                info = await nc.jetstream().consumer_info(streams.turns_stream("mem", tenant), "ingestor")
            except NotFoundError:
                return False
            if info.num_pending or info.num_ack_pending:
                return False
            for t, c in await wm.conversations(tenant):  # ...and every window written
                buffer = await wm.get(t, c)
                if buffer and (buffer.open or buffer.sealed):
                    return False
            return True

        await eventually(settled, timeout_s=240, interval_s=0.5)
    finally:
        for proc in processes.values():
            proc.send_signal(signal.SIGTERM)
        for proc in processes.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        await nc.close()
    assert deaths >= MAX_DELIVER, f"the fault killed {deaths} writers; see {log}"
    # Each replica has a Qdrant Edge folder of its own, where a shared store would hold one: a window both replicas
    # wrote lands in both, under the same deterministic id (one entry in a shared store). So a turn is stored once
    # when every episode holding it, in either folder, is the same entry.
    holders: dict[str, set[str]] = {}
    texts: list[str] = []
    for replica in replicas:
        store = EdgeStore.open(replica / "qdrant", 384)
        try:
            for episode in await all_entries(store, Scope(tenant_id=tenant), EntryFilter(kinds=["episodic"])):
                texts.append(episode.text)
                for turn_id in episode.source_turn_ids:
                    holders.setdefault(turn_id, set()).add(episode.id)
            facts = await all_entries(store, Scope(tenant_id=tenant, conversation_id="poisoned"),
                                      EntryFilter(kinds=["fact"]))
            assert facts == []  # stored plain: nothing read into it
        finally:
            await store.close()
    assert sorted(holders) == sorted(t.turn_id for t in poisoned + others), log.read_text()[-3000:]
    assert all(len(ids) == 1 for ids in holders.values()), holders
    assert any(MARKER in text and "I moved to Porto in May." in text for text in texts)
