"""`python -m bench.flood`: does one tenant flooding engram starve another tenant's recalls or ingest?

A real stack as in production (nats-server and `engram up` as separate processes). A calm tenant recalls at a
steady rate and stores a short conversation now and then; per stack, first alone, then while a flooding tenant (in
a process of its own) publishes thousands of turns at once, then hundreds of turns built to be slow for the text
rules (bench/hostile_text.py), then thousands of turns while it also sends recalls as fast as it can with many in
flight. One stack runs with the per-tenant recall limit off (`ENGRAM_RECALL_TENANT_SHARE=1`), one with it
on. The calm tenant's window latency during the turn flood against alone is ingestion's fairness; its recall p99
during the recall flood against alone, recall's.
"""
import argparse
import asyncio
import json
import multiprocessing
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench import chatter
from bench.hostile_text import hostile_texts
from bench.stack import engram_up
from engram_client import MemoryClient, publish_sessions, wait_until_stored
from engram_client.contract import RecallRequest, Turn
from engram_client.errors import EngramError, from_code
from shared.evaluation.latency import percentiles
from shared.evaluation.machine import describe

CALM, FLOODER = "calm", "flooder"
QUESTIONS = ["Where did I have lunch?", "Who went running at the park?", "When did I lose my keys?",
             "What did I buy in Berlin?", "Where did I read a book?", "Who took photos at the lake?",
             "Where did I play chess last week?", "What happened at the office yesterday?"]
REQUEST_TIMEOUT_S = 10.0
PROBE_TURNS = 4


def _code(exc: BaseException) -> str:
    """The wire code of a failed request (a client-side failure keeps its type name)."""
    return exc.code if isinstance(exc, EngramError) else type(exc).__name__


async def _seed(url: str, tenant: str, turns: int) -> None:
    """Store `turns` short turns of one user of the tenant and wait until they are recallable."""
    sessions = chatter.sessions(turns, max(1, turns // 10), f"{tenant}-u", seed=len(tenant))
    async with await MemoryClient.connect(url, tenant, timeout_s=60) as client:
        await publish_sessions(client, sessions)
        await wait_until_stored(client, [t for s in sessions for t in s], timeout_s=600)


async def _calm_recalls(url: str, rate: float, seconds: float) -> dict[str, Any]:
    """Recalls of the calm tenant at a steady `rate` (open loop: one is sent on time even if others are late)."""
    samples: list[float] = []
    errors: Counter[str] = Counter()
    async with await MemoryClient.connect(url, CALM, timeout_s=REQUEST_TIMEOUT_S) as client:

        async def one(question: str) -> None:
            started = time.perf_counter()
            try:
                await client.recall(question, user_id=f"{CALM}-u", k=10)
            except Exception as exc:  # counted by code: the point is which errors the calm tenant sees
                errors[_code(exc)] += 1
                return
            samples.append((time.perf_counter() - started) * 1e3)

        tasks = []
        start = time.perf_counter()
        for i in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
            tasks.append(asyncio.create_task(one(QUESTIONS[i % len(QUESTIONS)])))
        await asyncio.gather(*tasks)
    return {"sent": len(tasks), "ok": len(samples), "errors": dict(errors),
            "latency_ms": percentiles(samples).model_dump()}


async def _ingest_probes(url: str, phase: str, seconds: float, timeout_s: float) -> list[float]:
    """Seconds from publishing and flushing a short conversation of the calm tenant to it being stored; one
    conversation after another for `seconds` (the last one is waited for, up to `timeout_s`)."""
    delays: list[float] = []
    deadline = time.perf_counter() + seconds
    async with await MemoryClient.connect(url, CALM, timeout_s=60) as client:
        n = 0
        while not delays or time.perf_counter() < deadline:
            conversation_id = f"probe-{phase.replace(', ', '-').replace(' ', '-')}-{n}"
            turns = [Turn(conversation_id=conversation_id, turn_id=f"{conversation_id}-{i}", speaker="Ana",
                          role="user", text=f"Probe {n}: I visited museum number {n * 10 + i} today.",
                          ts=datetime(2024, 5, 1, 10, i, tzinfo=UTC), user_id=f"{CALM}-u")
                     for i in range(PROBE_TURNS)]
            started = time.perf_counter()
            await client.publish_turns(turns)
            await client.flush(conversation_id)
            await wait_until_stored(client, turns, timeout_s=timeout_s, interval_s=0.1)
            delays.append(time.perf_counter() - started)
            n += 1
    return delays


def _flooder(url: str, concurrency: int, turns: int, raw: bool, events: "Queue[tuple[str, Any]]",
             stop: Event, hostile: bool = False) -> None:
    """The flooding tenant, in a process of its own so its event loop never delays the calm tenant's client."""
    asyncio.run(_flood(url, concurrency, turns, raw, events, stop, hostile))


def _hostile_sessions(turns: int) -> list[list[Turn]]:
    """`turns` turns built to be slow for the text rules (bench/hostile_text.py), 4 to a conversation."""
    texts = hostile_texts()
    made = [Turn(conversation_id=f"hostile-{i // 4}", turn_id=f"hostile-{i}", speaker="Mallory", role="user",
                 text=texts[i % len(texts)], ts=datetime(2024, 5, 1, 10, tzinfo=UTC), user_id=f"{FLOODER}-u")
            for i in range(turns)]
    return [made[i:i + 4] for i in range(0, len(made), 4)]


async def _flood(url: str, concurrency: int, turns: int, raw: bool, events: "Queue[tuple[str, Any]]",
                 stop: Event, hostile: bool = False) -> None:
    """Recalls as fast as `concurrency` callers can send them, and `turns` turns published at once (chat, or with
    `hostile` turns built to be slow for the text rules), until `stop`. With `raw`, the callers ignore engram's retry
    hint and ask again at once (a hostile client); else they use the SDK, which waits as the hint says."""
    clients = [await MemoryClient.connect(url, FLOODER, timeout_s=REQUEST_TIMEOUT_S) for _ in range(4)]
    outcomes: Counter[str] = Counter()
    stopping = asyncio.Event()

    async def watch() -> None:
        while not stop.is_set():
            await asyncio.sleep(0.05)
        stopping.set()

    async def recaller(i: int) -> None:
        client = clients[i % len(clients)]
        payload = RecallRequest(query=QUESTIONS[i % len(QUESTIONS)], user_id=f"{FLOODER}-u", k=10)
        while not stopping.is_set():
            try:
                if raw:
                    reply = await client.raw_request("recall", payload.model_dump_json().encode())
                    if reply.get("error"):
                        raise from_code(reply["error"]["code"], reply["error"]["message"])
                else:
                    await client.recall(payload)
            except Exception as exc:  # a refusal is expected; the caller asks again, as a flood does
                outcomes[_code(exc)] += 1
            else:
                outcomes["ok"] += 1

    async def publisher(sessions: list[list[Turn]]) -> None:
        for session in sessions:
            await clients[0].publish_turns(session)
            await clients[0].flush(session[0].conversation_id)

    watcher = asyncio.create_task(watch())
    events.put(("started", time.time()))
    started = time.perf_counter()
    recallers = [asyncio.create_task(recaller(i)) for i in range(concurrency)]
    if turns:
        sessions = _hostile_sessions(turns) if hostile else \
            chatter.sessions(turns, max(1, turns // 10), f"{FLOODER}-flood", seed=7)
        await asyncio.gather(*(publisher(sessions[i::16]) for i in range(16)))
        events.put(("published", {"turns": turns, "seconds": time.perf_counter() - started}))
    await asyncio.gather(*recallers)
    await watcher
    for client in clients:
        await client.close()
    events.put(("done", {"seconds": time.perf_counter() - started, "cpu_s": time.process_time(),
                         "outcomes": dict(outcomes)}))


class _Events:
    """What the flooder process reported, read from its queue by one task and awaited by kind."""

    def __init__(self, queue: "Queue[tuple[str, Any]]") -> None:
        self._queue = queue
        self._seen: dict[str, asyncio.Future[Any]] = {}
        self._reader = asyncio.create_task(self._read())

    def _future(self, kind: str) -> "asyncio.Future[Any]":
        return self._seen.setdefault(kind, asyncio.get_running_loop().create_future())

    async def _read(self) -> None:
        kind = ""
        while kind != "done":
            kind, value = await asyncio.to_thread(self._queue.get, True, 900)
            self._future(kind).set_result(value)

    async def wait(self, kind: str) -> Any:
        """The value of the flooder's event `kind`, once it came."""
        return await self._future(kind)


async def _phase(url: str, name: str, args: argparse.Namespace, flood: str | None) -> dict[str, Any]:
    """One phase: the calm tenant's recalls and ingest, alone (None) or during the flooder's `turns` or `both`."""
    result: dict[str, Any] = {"phase": name, "flood": flood}
    if flood is None:
        recalls, delays = await asyncio.gather(_calm_recalls(url, args.calm_rate, args.phase_s),
                                               _ingest_probes(url, name, args.phase_s, args.probe_timeout_s))
        return {**result, "calm": recalls, "ingest_delay_s": percentiles(delays).model_dump(),
                "ingest_probes": delays}
    context = multiprocessing.get_context("spawn")
    queue: Queue[tuple[str, Any]] = context.Queue()
    stop = context.Event()
    concurrency = args.flood_concurrency if flood == "both" else 0
    turns = args.hostile_turns if flood == "hostile" else args.flood_turns
    process = context.Process(target=_flooder, args=(url, concurrency, turns, args.flooder == "raw", queue, stop,
                                                     flood == "hostile"))
    process.start()
    events = _Events(queue)
    try:
        await events.wait("started")
        probes = asyncio.create_task(_probes_after_flood(url, name, args, events))
        recalls = await _calm_recalls(url, args.calm_rate, args.phase_s)
        stop.set()  # the recall flood ends with the calm tenant's window; the turns it published stay queued
        flooder = await events.wait("done")
        published, delays = await probes
    finally:
        stop.set()
        process.join(timeout=60)
        if process.is_alive():
            process.kill()
    outcomes = flooder["outcomes"]
    return {**result, "calm": recalls, "ingest_delay_s": percentiles(delays).model_dump(), "ingest_probes": delays,
            "flood_turns": published, "flooder": {"ok": outcomes.get("ok", 0),
                                                  "refused": outcomes.get("unavailable", 0),
                                                  "other_errors": {k: v for k, v in outcomes.items()
                                                                   if k not in ("ok", "unavailable")},
                                                  "seconds": flooder["seconds"], "cpu_s": flooder["cpu_s"]}}


async def _probes_after_flood(url: str, name: str, args: argparse.Namespace,
                              events: _Events) -> tuple[dict[str, Any], list[float]]:
    """The calm tenant's ingest probes, started once the flood's turns are all published (so they queue behind)."""
    published: dict[str, Any] = await events.wait("published") if args.flood_turns else {}
    return published, await _ingest_probes(url, name, args.phase_s, args.probe_timeout_s)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Each stack (limit off, limit on): seed both tenants, then the calm tenant alone, then during the flood."""
    results: dict[str, Any] = {"machine": describe(), "settings": {k: str(v) for k, v in vars(args).items()},
                               "phases": []}
    for limit in args.limits.split(","):
        share = "1" if limit == "off" else args.share
        with tempfile.TemporaryDirectory() as tmp, \
                engram_up(Path(tmp), {"ENGRAM_RECALL_TENANT_SHARE": share}) as url:
            await asyncio.gather(_seed(url, CALM, args.seed_turns), _seed(url, FLOODER, args.seed_turns))
            for flood in (None, "turns", "hostile", "both"):
                name = {None: "alone", "turns": "turn flood", "hostile": "hostile turns",
                        "both": "turn and recall flood"}[flood]
                phase = await _phase(url, f"{name}, limit {limit}", args, flood)
                results["phases"].append({**phase, "limit": limit, "share": float(share)})
    return results


def print_table(results: dict[str, Any], console: Console) -> None:
    """The phases side by side, and the calm tenant's p99 during the flood against alone."""
    machine = results["machine"]
    settings = results["settings"]
    console.print(f"machine: {machine['cores']} cores, {machine['memory_gb']} GB, Python {machine['python']}")
    table = Table(title=f"calm tenant at {settings['calm_rate']} recalls/s for {settings['phase_s']} s; flooder: "
                        f"{settings['flood_concurrency']} recalls in flight ({settings['flooder']} client) and "
                        f"{settings['flood_turns']} turns")
    for column in ("phase", "share", "calm ok", "calm errors", "calm p50 ms", "calm p99 ms", "flooder ok",
                   "flooder refused", "flooder other", "flooder CPU %", "calm ingest delay p50 s", "max s"):
        table.add_column(column, justify="right")
    for phase in results["phases"]:
        calm, flooder = phase["calm"], phase.get("flooder")
        table.add_row(phase["phase"], f"{phase['share']:g}", f"{calm['ok']}/{calm['sent']}",
                      ", ".join(f"{k} {v}" for k, v in calm["errors"].items()) or "0",
                      f"{calm['latency_ms']['p50']:.1f}", f"{calm['latency_ms']['p99']:.1f}",
                      f"{flooder['ok']:,}" if flooder else "", f"{flooder['refused']:,}" if flooder else "",
                      ", ".join(f"{k} {v}" for k, v in flooder["other_errors"].items()) if flooder else "",
                      f"{100 * flooder['cpu_s'] / flooder['seconds']:.0f}" if flooder else "",
                      f"{phase['ingest_delay_s']['p50']:.2f}", f"{max(phase['ingest_probes']):.2f}")
    console.print(table)
    by_name = {p["phase"]: p for p in results["phases"]}
    for limit in settings["limits"].split(","):
        alone = by_name.get(f"alone, limit {limit}")
        both = by_name.get(f"turn and recall flood, limit {limit}")
        if alone and both and alone["calm"]["latency_ms"]["p99"]:
            ratio = both["calm"]["latency_ms"]["p99"] / alone["calm"]["latency_ms"]["p99"]
            results.setdefault("p99_ratio", {})[limit] = ratio
            console.print(f"limit {limit}: calm recall p99 during the turn and recall flood / alone = {ratio:.2f}")
        hostile = by_name.get(f"hostile turns, limit {limit}")
        if alone and hostile and alone["calm"]["latency_ms"]["p99"]:
            ratio = hostile["calm"]["latency_ms"]["p99"] / alone["calm"]["latency_ms"]["p99"]
            results.setdefault("hostile_p99_ratio", {})[limit] = ratio
            console.print(f"limit {limit}: calm recall p99 during the hostile turns / alone = {ratio:.2f}")
        for kind in ("turn flood", "hostile turns", "turn and recall flood"):
            flood = by_name.get(f"{kind}, limit {limit}")
            if alone and flood and alone["ingest_delay_s"]["p50"]:
                ingest = flood["ingest_delay_s"]["p50"] / alone["ingest_delay_s"]["p50"]
                worst = max(flood["ingest_probes"]) / max(alone["ingest_probes"])
                results.setdefault("ingest_ratio", {}).setdefault(limit, {})[kind] = {"p50": ingest, "max": worst}
                console.print(f"limit {limit}: calm window stored during the {kind} / alone = {ingest:.2f} at "
                              f"p50, {worst:.2f} at the slowest")


def cli() -> None:
    """Parse arguments, run, print, write results.json."""
    parser = argparse.ArgumentParser(prog="python -m bench.flood", description=__doc__)
    parser.add_argument("--limits", default="off,on", help="stacks to run: off (share 1), on (--share)")
    parser.add_argument("--share", default="0.5", help="ENGRAM_RECALL_TENANT_SHARE of the stack with the limit on")
    parser.add_argument("--phase-s", type=float, default=30.0, help="seconds of each phase")
    parser.add_argument("--calm-rate", type=float, default=8.0, help="the calm tenant's recalls per second")
    parser.add_argument("--flood-concurrency", type=int, default=128, help="the flooder's recalls in flight")
    parser.add_argument("--flooder", choices=["sdk", "raw"], default="sdk",
                        help="sdk: the flooder's client waits as engram's retry hint says; raw: it asks again at once")
    parser.add_argument("--flood-turns", type=int, default=2000, help="turns the flooder publishes at once")
    parser.add_argument("--hostile-turns", type=int, default=200,
                        help="turns built to be slow for the text rules the flooder publishes in its hostile phase")
    parser.add_argument("--seed-turns", type=int, default=80, help="turns each tenant stores before measuring")
    parser.add_argument("--probe-timeout-s", type=float, default=600.0,
                        help="longest wait for one ingest probe (a conversation of the calm tenant) to be stored")
    parser.add_argument("--out", type=Path, default=Path("bench-out/flood"))
    args = parser.parse_args()
    console = Console(width=200)
    results = asyncio.run(run(args))
    print_table(results, console)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "results.json"
    path.write_text(json.dumps(results, indent=2, default=str))
    console.print(f"wrote {path}")


if __name__ == "__main__":
    cli()
