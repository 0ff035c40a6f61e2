"""Chaos: the process that runs consolidation is SIGKILLed mid-job, again and again, and restarted.

`engram up` runs as production runs it (its own process, Qdrant Edge in its data folder, nats-server apart). Two
tenants get the same turns; one is consolidated cleanly, the other is killed mid-run at each of several points of
the job (at the first, third, ... change it announces: announced changes are written right after, so a kill there
leaves some written and some not), then consolidated once more to the end. Its memory must equal the clean
tenant's, a further run must change nothing, and every turn must be a source of exactly one active episode.

The lease lives as long as engram ships it (60 s): the forget asked right after the last kill must be answered
within 20 s, because the restarted process takes over the lease of the killed one, whose process it sees is gone
(consolidation/process.py), instead of waiting out its TTL (with the old lease, it timed out).
"""
import asyncio
import contextlib
import os
import signal
import subprocess
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
import pytest

from engram_client import MemoryClient, wait_until_stored
from engram_client.contract import EntryView, Turn
from tests.support.ids import unique
from tests.support.memory import memory_without_ids
from tests.support.polling import eventually
from tests.support.spare import Spare
from tests.support.turns import conversation

MAY = datetime(2024, 5, 6, 10, 0, tzinfo=UTC)
CITIES = ["Lisbon", "Porto", "Berlin", "Madrid"]
JOBS = ["Google", "Spotify", "Farfetch", "Siemens"]
PETS = ["Luna", "Rex", "Milo", "Nala"]
KILL_AT_CHANGE = [1, 3, 6]  # the n-th change announced in the run that is killed
LEASE_TAKEOVER_S = 20.0  # the first request after the last kill: a third of the shipped lease TTL (60 s)


def lines_of(user: int) -> list[tuple[str, str]]:
    """A user who moves, changes jobs and gets a pet, with small talk between."""
    name = f"User{user}"
    out = []
    for step in range(3):
        out += [(name, f"I live in {CITIES[(user + step) % 4]} now."), ("Bot", "Good to know."),
                (name, f"I work at {JOBS[(user + step) % 4]}."), ("Bot", "Nice."),
                (name, f"My dog is called {PETS[(user + step) % 4]}."), ("Bot", "Cute.")]
    return out


def turns_of(tenant_users: int) -> list[Turn]:
    """Each user's life in three conversations months apart, and a repeated conversation that should merge."""
    turns: list[Turn] = []
    for user in range(tenant_users):
        lines = lines_of(user)
        for step in range(3):
            turns += conversation(lines[step * 6:(step + 1) * 6], f"u{user}-c{step}",
                                  MAY + timedelta(days=60 * step), user_id=f"u{user}")
        for copy in ("again", "twice"):
            turns += conversation(lines[:6], f"u{user}-{copy}", MAY + timedelta(hours=2), user_id=f"u{user}")
    return turns


class EngramProcess:
    """`engram up` in its own process, started and SIGKILLed at will, on one data folder. The process for the next
    start is made (and does its imports) while the current one runs (tests/support/spare.py)."""

    def __init__(self, folder: Path, nats_url: str) -> None:
        self.folder, self.log = folder, folder / "engram.log"
        self.env = {**os.environ, "ENGRAM_NATS_URL": nats_url, "ENGRAM_DATA_DIR": str(folder / "data"),
                    "ENGRAM_HTTP_PORT": "0", "ENGRAM_SWEEP_INTERVAL_S": "0.2", "ENGRAM_SEAL_GRACE_S": "1",
                    "ENGRAM_IDLE_TIMEOUT_S": "2",
                    "ENGRAM_CONSOLIDATE_INTERVAL_S": "1e9"}  # no scheduled run: only the ones the test asks for
        self.proc: subprocess.Popen[bytes] | None = None
        self.spare: Spare | None = None
        self.starts = 0

    async def start(self, again: bool = True) -> None:
        """Start it and wait until it says it is up; `again`: it will be started once more after this one."""
        offset = self.log.stat().st_size if self.log.exists() else 0
        self.proc = (self.spare or Spare(["up"], self.env, self.log)).run()
        self.starts += 1
        proc = self.proc

        def up() -> bool:
            assert proc.poll() is None, self.log.read_text()[-3000:]  # it exited: its log says why
            return b"engram is up" in self.log.read_bytes()[offset:]

        await eventually(up, timeout_s=120)
        self.spare = Spare(["up"], self.env, self.log) if again else None

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, the lease is neither renewed nor given back."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        """SIGTERM, as an orchestrator stops it (and end the spare, never started)."""
        if self.spare is not None:
            self.spare.discard()
            self.spare = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@contextlib.asynccontextmanager
async def engram(folder: Path, nats_url: str) -> AsyncIterator[EngramProcess]:
    """An EngramProcess, started, and stopped at the end whatever happens."""
    process = EngramProcess(folder, nats_url)
    await process.start()
    try:
        yield process
    finally:
        process.stop()


async def kill_at_change(process: EngramProcess, nats_url: str, tenant: str, nth: int) -> int:
    """Start a consolidation of `tenant` and SIGKILL the process when it announces its `nth` change (or when the
    run ends first). Returns how many changes were announced before the kill."""
    nc = await nats.connect(nats_url)
    seen = 0
    reached = asyncio.Event()

    async def on_event(_: object) -> None:
        nonlocal seen
        seen += 1
        if seen >= nth:
            reached.set()

    sub = await nc.subscribe(f"mem.{tenant}.events.>", cb=on_event)
    client = await MemoryClient.connect(nats_url, tenant, timeout_s=60)
    run = asyncio.create_task(client.consolidate())
    try:
        done, _ = await asyncio.wait([run, asyncio.create_task(reached.wait())], timeout=60,
                                     return_when=asyncio.FIRST_COMPLETED)
        assert done, "the consolidation neither announced a change nor finished"
        process.kill()
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await client.close()
        await sub.unsubscribe()
        await nc.close()
    return seen


def accounting(views: list[EntryView], turns: list[Turn]) -> tuple[set[str], list[str]]:
    """(lost, doubled): turns in no active episode, and turns in more than one."""
    active = [v for v in views if v.kind == "episodic" and v.merged_into is None and v.superseded_by is None]
    counts = Counter(t for v in active for t in v.source_turn_ids)
    return {t.turn_id for t in turns} - set(counts), [t for t, n in counts.items() if n > 1]


async def all_entries(client: MemoryClient) -> list[EntryView]:
    """Every entry of the client's tenant, page by page."""
    views: list[EntryView] = []
    cursor = None
    while True:
        page = await client.entries(op="list", limit=500, cursor=cursor)
        views += page.entries
        if page.next_cursor is None:
            return views
        cursor = page.next_cursor


@pytest.mark.timeout(600)
async def test_sigkill_mid_consolidation_again_and_again_ends_as_one_clean_run(tmp_path: Path, nats_url: str) -> None:
    """A tenant whose consolidation is SIGKILLed mid-job three times and then run to the end has the same memory as a
    tenant consolidated once cleanly, loses and doubles no turn, and a further run changes nothing."""
    crashed, clean = unique("crashed"), unique("clean")
    turns = turns_of(tenant_users=4)
    async with engram(tmp_path, nats_url) as process:
        for tenant in (crashed, clean):
            async with await MemoryClient.connect(nats_url, tenant, timeout_s=30) as client:
                await client.publish_turns(turns)
                for conversation_id in dict.fromkeys(t.conversation_id for t in turns):
                    await client.flush(conversation_id)
                await wait_until_stored(client, turns, timeout_s=180)
        async with await MemoryClient.connect(nats_url, clean, timeout_s=60) as client:
            reference = await client.consolidate()
        announced = []
        for nth in KILL_AT_CHANGE:
            announced.append(await kill_at_change(process, nats_url, crashed, nth))
            last_start = process.log.stat().st_size  # where the last start's log begins
            await process.start(again=nth != KILL_AT_CHANGE[-1])
        # The killed run's lease, renewed every 20 s, has more than 20 s to live when the restarted engram is up: a
        # forget asked once with that timeout is answered only because the lease is taken over, not waited out.
        async with await MemoryClient.connect(nats_url, crashed, timeout_s=LEASE_TAKEOVER_S) as quick:
            receipt = await quick.forget(user_id="nobody")
        async with await MemoryClient.connect(nats_url, crashed, timeout_s=60) as client:
            final = await client.consolidate()
            again = await client.consolidate()
            crashed_views = await all_entries(client)
        async with await MemoryClient.connect(nats_url, clean, timeout_s=60) as client:
            clean_views = await all_entries(client)
    lost, doubled = accounting(crashed_views, turns)
    print(f"\nconsolidator SIGKILLed {len(KILL_AT_CHANGE)} times mid-run (after {announced} announced changes; a "
          f"clean run makes {reference.superseded} supersedes, {reference.merged} merges); the run after: "
          f"superseded={final.superseded} merged={final.merged}; one more: superseded={again.superseded} "
          f"merged={again.merged}; {len(turns)} turns: lost={len(lost)} doubled={len(doubled)}")
    assert reference.merged > 0, reference  # there was work to cut in the middle (supersede happens at ingest)
    assert announced[0] >= KILL_AT_CHANGE[0], announced
    assert not lost and not doubled, (sorted(lost)[:5], doubled[:5])
    assert accounting(clean_views, turns) == (set(), [])
    assert memory_without_ids(crashed_views) == memory_without_ids(clean_views)
    assert (again.superseded, again.merged, again.forgotten) == (0, 0, 0), again
    assert receipt.verified, receipt
    # Taken over from the last killed process (whose run held the lease), as the last start's log says.
    last_log = process.log.read_bytes()[last_start:].decode(errors="replace")
    assert f"took over the consolidation lease of tenant {crashed!r}" in last_log
