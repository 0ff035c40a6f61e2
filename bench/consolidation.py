"""Consolidation at scale: one tenant of N entries across 1,000 users (one of them with 40,000 episodes), and the
scheduler's pass over 10,000 tenants, on Qdrant Edge in-process and a real nats-server for the schedule's state.

Each phase runs in a fresh process (`python -m bench.consolidation <phase> ...`) so its peak resident memory
(VmHWM) is its own: fill the shard; the first scheduled run (every owner new); then a quiet slot in which 1% of
the users (10 ordinary ones) got new episodes, and the scheduled run that follows it; then a slot in which only the
big user got new episodes, and its run. The runs go
through `Scheduler.pass_once`, the consolidator's own entry point, with the tenant made due in the schedule's KV
bucket. Entries are synthetic but shaped like real ones: 85% episodes (a few near-duplicates to merge), 15% facts
in 20 slots per user (newer statements supersede older ones), Zipf-distributed words, random unit vectors.
"""
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import numpy as np

from bench import memory
from bench.scale import DIM, _unit, _words
from engram_client.contract import Event
from shared.consolidation.lease import Leases
from shared.consolidation.run import Consolidation
from shared.consolidation.schedule import Scheduler
from shared.embedding import Bm25Encoder
from shared.messaging import nats_server
from shared.settings import Settings
from shared.store import EdgeStore, MemoryEntry, StoredEntry, Vectors

TENANT = "big"
USERS = 1_000
BIG_USER_EPISODES = 40_000
FACT_SHARE = 0.15
ATTRIBUTES = 20
DUPLICATE_SHARE = 0.05
TOUCHED_USERS = 10          # users with new episodes in the quiet slot (1%)
TOUCH_EPISODES = 20         # new episodes each
SCHEDULER_TENANTS = 10_000
SCHEDULER_ENTRIES = 5       # per tenant
INTERVAL_S = 365 * 86_400   # one slot for the whole benchmark: only the tenants it marks due are due
BATCH = 1_000
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


def _user(n: int, total: int) -> str:
    """The owner of entry n: the first 40,000 are the big user's, the rest spread over the other 999."""
    if n < min(BIG_USER_EPISODES, total // 2):
        return "u0000"
    return f"u{1 + n % (USERS - 1):04d}"


def _entry(n: int, user: str, text: str, now: datetime, fact_slot: int | None, tenant: str = TENANT) -> MemoryEntry:
    at = EPOCH + timedelta(minutes=n)
    common: dict[str, Any] = {"id": str(uuid.UUID(int=n + 1)), "tenant_id": tenant, "user_id": user,
                              "conversation_id": f"{user}-c{n // 40}", "occurred_at": at, "created_at": now,
                              "updated_at": now, "source_turn_ids": [f"{n}"], "persons": [user]}
    if fact_slot is None:
        return MemoryEntry(**common, text=f"[{at:%d %B %Y}] {user}: {text}")
    attribute = f"a{fact_slot}"
    return MemoryEntry(**common, kind="fact", text=f"{user}'s {attribute} is {text.split()[0]}", subject=user,
                       attribute=attribute, value=text.split()[0], slot_key=f"{user.lower()}|{attribute}",
                       importance=0.6)


async def _upsert(store: EdgeStore, bm25: Bm25Encoder, rng: np.random.Generator, entries: list[MemoryEntry]) -> None:
    vectors = _unit(rng, len(entries))
    for i, e in enumerate(entries):
        if e.kind == "episodic" and i and rng.random() < DUPLICATE_SHARE:  # a near-duplicate of the one before
            vectors[i] = vectors[i - 1] + rng.standard_normal(DIM).astype(np.float32) * 0.01
            vectors[i] /= np.linalg.norm(vectors[i])
    await store.upsert([StoredEntry(entry=e, vectors=Vectors(dense=v.tolist(), sparse=bm25.document(e.text, "english")))
                        for e, v in zip(entries, vectors, strict=True)])


async def fill(folder: Path, total: int) -> dict[str, Any]:
    """Fill the tenant with `total` entries; returns seconds and entries per second."""
    rng = np.random.default_rng(11)
    bm25 = Bm25Encoder("english")
    store = EdgeStore.open(folder, DIM, indexing=True)
    now = datetime.now(UTC) - timedelta(days=1)  # written a day ago: before the last scheduled run, as in a live tenant
    started = time.perf_counter()
    for first in range(0, total, BATCH):
        count = min(BATCH, total - first)
        texts = _words(rng, count, 30)
        batch = []
        for i in range(count):
            n = first + i
            user = _user(n, total)
            fact = user != "u0000" and rng.random() < FACT_SHARE
            batch.append(_entry(n, user, texts[i], now, int(rng.integers(ATTRIBUTES)) if fact else None))
        await _upsert(store, bm25, rng, batch)
    await store.optimize()
    took = time.perf_counter() - started
    await store.close()
    return {"entries": total, "fill_s": took, "entries_per_s": total / took}


async def touch(folder: Path, total: int, big: bool) -> dict[str, Any]:
    """New episodes for 1% of the users (ordinary ones), as a quiet slot brings; or for the big user alone."""
    rng = np.random.default_rng(13 + big)
    bm25 = Bm25Encoder("english")
    store = EdgeStore.open(folder, DIM)
    now = datetime.now(UTC)
    users = ["u0000"] if big else [f"u{1 + k * (USERS - 1) // TOUCHED_USERS:04d}" for k in range(TOUCHED_USERS)]
    n = total + (20_000_000 if big else 10_000_000)
    batch = []
    for user in users:
        for text in _words(rng, TOUCH_EPISODES, 30):
            batch.append(_entry(n, user, text, now, None))
            n += 1
    await _upsert(store, bm25, rng, batch)
    await store.close()
    return {"touched_users": len(users), "new_episodes": len(batch)}


async def _noop_publish(tenant: str, event: Event) -> None:
    return None


def _settings() -> Settings:
    return Settings(consolidate_interval_s=INTERVAL_S)


async def _scheduler(folder: Path, nats_url: str) -> tuple[Scheduler, EdgeStore, Any]:
    settings = _settings()
    store = EdgeStore.open(folder, DIM)
    nc = await nats.connect(nats_url)
    leases = await Leases.open(nc.jetstream(), settings.subject_prefix, "bench", settings.lease_ttl_s)
    consolidation = Consolidation(store=store, publish=_noop_publish, sparse=Bm25Encoder("english"),
                                  settings=settings)
    return Scheduler(consolidation, leases, INTERVAL_S), store, nc


async def scheduled_run(folder: Path, nats_url: str) -> dict[str, Any]:
    """Make the tenant due (its last run a slot ago) and time the scheduler's pass that runs it.

    Besides VmHWM (the peak of all resident memory, mapped shard files included), a sampler records the peaks of
    the heap (RssAnon) and of the mapped files (RssFile) apart (sampled: lower bounds), and what the process held
    once the shard was open.
    """
    baseline = memory.status_mb()["rss_mb"]
    scheduler, store, nc = await _scheduler(folder, nats_url)
    opened = memory.status_mb()
    slot = scheduler.slot()
    if hasattr(scheduler.leases, "last_run"):  # keep what the last run recorded: its start is where changes begin
        last = await scheduler.leases.last_run(TENANT)
        await scheduler.leases.finished(TENANT, slot - 1, last.started_at, last.fingerprint, last.full_slot)
    else:  # the code before scheduled runs looked for changes recorded the slot alone
        await scheduler.leases.finished(TENANT, slot - 1)
    with memory.PeakSampler() as peaks:
        started = time.perf_counter()
        ran = await scheduler.pass_once()
        took = time.perf_counter() - started
    await store.close()
    await nc.close()
    status = memory.status_mb(memory.PEAK)
    return {"ran": ran, "run_s": took, "peak_mb": status["peak_mb"], "peak_growth_mb": status["peak_mb"] - baseline,
            "opened_rss_mb": opened["rss_mb"], "opened_anon_mb": opened["anon_mb"],
            "opened_file_mb": opened["file_mb"], **peaks.peaks}


async def fill_tenants(folder: Path, tenants: int) -> dict[str, Any]:
    """`tenants` tenants (10,000) of a few entries each."""
    rng = np.random.default_rng(17)
    bm25 = Bm25Encoder("english")
    store = EdgeStore.open(folder, DIM, indexing=True)
    now = datetime.now(UTC)
    total = tenants * SCHEDULER_ENTRIES
    started = time.perf_counter()
    for first in range(0, total, BATCH):
        texts = _words(rng, BATCH, 30)
        batch = [_entry(n, "u0001", texts[n - first], now, None, tenant=f"t{n % tenants:05d}")
                 for n in range(first, min(first + BATCH, total))]
        await _upsert(store, bm25, rng, batch)
    await store.optimize()
    await store.close()
    return {"tenants": tenants, "entries": total, "fill_s": time.perf_counter() - started}


async def scheduler_passes(folder: Path, nats_url: str, tenants: int) -> dict[str, Any]:
    """The pass that first sees every tenant, a pass with nothing due, and one with 1% of the tenants due."""
    scheduler, store, nc = await _scheduler(folder, nats_url)
    out: dict[str, Any] = {"tenants": tenants, "due": max(1, tenants // 100)}
    started = time.perf_counter()
    await scheduler.pass_once()
    out["first_seen_s"] = time.perf_counter() - started
    started = time.perf_counter()
    ran = await scheduler.pass_once()
    out["nothing_due_s"], out["nothing_due_ran"] = time.perf_counter() - started, ran
    slot = scheduler.slot()
    for k in range(out["due"]):
        await scheduler.leases.finished(f"t{k * (tenants // out['due']):05d}", slot - 1)
    started = time.perf_counter()
    ran = await scheduler.pass_once()
    out["some_due_s"], out["some_due_ran"] = time.perf_counter() - started, ran
    await store.close()
    await nc.close()
    out.update(memory.status_mb(memory.PEAK))
    return out


def _phase(*args: str) -> dict[str, Any]:
    """One phase in a fresh process; its JSON result."""
    done = subprocess.run([sys.executable, "-m", "bench.consolidation", *args], capture_output=True, text=True,
                          cwd=Path(__file__).parents[1])
    if done.returncode:
        raise RuntimeError(f"bench.consolidation {args[0]} failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(sizes: list[int], tenants: int = SCHEDULER_TENANTS) -> dict[str, Any]:
    """Every size: fill, first run, quiet slot, scheduled run; then the scheduler over `tenants` tenants."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="engram-consolidation-") as tmp:
        server = nats_server.start(Path(tmp) / "nats")
        try:
            for size in sizes:
                folder = Path(tmp) / f"edge-{size}"
                filled = _phase("fill", str(folder), str(size))
                first = _phase("run", str(folder), server.url)
                touched = _phase("touch", str(folder), str(size), "ordinary")
                steady = _phase("run", str(folder), server.url)
                _phase("touch", str(folder), str(size), "big")
                big = _phase("run", str(folder), server.url)
                rows.append({"entries": size, "users": USERS, "big_user_episodes": min(BIG_USER_EPISODES, size // 2),
                             "fill": filled, "first_run": first, "touched": touched, "quiet_run": steady,
                             "big_user_run": big})
                subprocess.run(["rm", "-rf", str(folder)], check=True)
            folder = Path(tmp) / "edge-tenants"
            filled = _phase("fill-tenants", str(folder), str(tenants))
            passes = {**_phase("passes", str(folder), server.url, str(tenants)), "fill_s": filled["fill_s"]}
        finally:
            server.stop()
    return {"rows": rows, "scheduler": passes}


def main(argv: list[str]) -> None:
    """Run one phase and print its result as JSON on the last line."""
    phase, folder = argv[0], Path(argv[1])
    if phase == "fill":
        result = asyncio.run(fill(folder, int(argv[2])))
    elif phase == "touch":
        result = asyncio.run(touch(folder, int(argv[2]), argv[3] == "big"))
    elif phase == "run":
        result = asyncio.run(scheduled_run(folder, argv[2]))
    elif phase == "fill-tenants":
        result = asyncio.run(fill_tenants(folder, int(argv[2])))
    elif phase == "passes":
        result = asyncio.run(scheduler_passes(folder, argv[2], int(argv[3])))
    else:
        raise SystemExit(f"unknown phase {phase!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
