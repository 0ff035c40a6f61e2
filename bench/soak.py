"""`python -m bench.soak`: sustained load with chaos against a real engram, then exactly-once accounting.

nats-server and `engram up` run as separate processes, as in production. Many tenants' users publish turns at
a set rate (retrying through outages, as a product does), while recalls, `consolidate` requests and a few
forgets (whole users, single conversations) run beside them; optionally engram is SIGKILLed and restarted every
`--kill-every-s` and nats-server every `--restart-nats-every-s`. Once a second the soak samples turns published
and stored, consumer lag and engram's resident memory. At the end it waits until everything has settled, stops
engram, opens its store and accounts for every published turn (see bench/soak_audit.py). The exit code is 1
when a turn was lost, stored twice, or left behind after a forget.
"""
import argparse
import asyncio
import logging
import random
import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from bench import soak_report
from bench.soak_audit import audit_store
from bench.soak_chatter import population
from bench.soak_load import Clients, Ledger, connect, consolidate_load, converse, forget_plan, recall_load
from bench.soak_sample import Sampler, as_rows
from bench.soak_stack import SoakStack
from shared.evaluation.latency import percentiles
from shared.evaluation.machine import describe

SETTLE_POLL_S = 0.5


async def _chaos(every_s: float, name: str, stack: SoakStack, lock: asyncio.Lock, ledger: Ledger,
                 stop: asyncio.Event) -> None:
    """Every `every_s`: SIGKILL engram and start it again, or kill nats-server and start it again."""
    if every_s <= 0:
        return
    blows = 0
    while not stop.is_set():  # wait_for(..., 0) times out even when the event is set: look first
        blows += 1
        try:  # on a fixed schedule (every_s, 2 every_s...), however long each blow took to recover from
            await asyncio.wait_for(stop.wait(), max(0.0, blows * every_s - ledger.elapsed()))
            return
        except TimeoutError:
            pass
        async with lock:  # one blow at a time: engram starting while NATS is down is not what is measured
            at, started = ledger.elapsed(), time.perf_counter()
            if name == "engram_kill":
                await asyncio.to_thread(stack.kill_engram)
                await asyncio.to_thread(stack.start_engram)
            else:
                await asyncio.to_thread(stack.restart_nats)
            ledger.chaos.append({"t_s": round(at, 1), "action": name,
                                 "back_after_s": round(time.perf_counter() - started, 2)})


async def _settle(sampler: Sampler, tenants: list[str], timeout_s: float) -> float | None:
    """Seconds until nothing is pending anywhere (None: not within `timeout_s`)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if await sampler.settled(tenants):
            return time.monotonic() - started
        await asyncio.sleep(SETTLE_POLL_S)
    return None


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the soak described by `args` and return its results."""
    folder = args.out / "stack"
    shutil.rmtree(folder, ignore_errors=True)
    env = dict(item.split("=", 1) for item in args.engram_env)
    stack = SoakStack(folder=folder, engram_env=env)
    await asyncio.to_thread(stack.start)
    rng = random.Random(args.seed)
    tenants = [f"soak{i}" for i in range(args.tenants)]
    users = population(tenants, args.users, args.conversations, args.seed)
    plans = forget_plan(users, args.forget_users, args.forget_conversations, args.duration_s, rng)
    clients: dict[str, Clients] = {}
    ledger = Ledger()
    sampler = Sampler(stack=stack, ledger=ledger)
    try:
        for tenant in tenants:
            clients[tenant] = await connect(stack.nats_url, tenant)
        await sampler.open()
        stop_publish, stop_load = asyncio.Event(), asyncio.Event()
        stop_sampling, lock = asyncio.Event(), asyncio.Lock()
        ledger.started = time.monotonic()
        sampling = asyncio.create_task(sampler.run(stop_sampling))
        interval_s = len(users) / args.rate
        publishing = [asyncio.create_task(converse(u, clients[u.tenant], ledger, interval_s,
                                                   plans.get((u.tenant, u.user_id), []), stop_publish))
                      for u in users]
        load = [asyncio.create_task(recall_load(clients, users, args.recall_rate, ledger, stop_load, rng)),
                 asyncio.create_task(consolidate_load(clients, args.consolidate_every_s, ledger, stop_load)),
                 asyncio.create_task(_chaos(args.kill_every_s, "engram_kill", stack, lock, ledger, stop_load)),
                 asyncio.create_task(_chaos(args.restart_nats_every_s, "nats_restart", stack, lock, ledger,
                                            stop_load))]
        await asyncio.sleep(args.duration_s)
        stop_publish.set()
        await asyncio.gather(*publishing)
        load_s, published = ledger.elapsed(), len(ledger.published)
        await asyncio.sleep(args.quiet_tail_s)  # no turns published; recalls and consolidations go on
        stop_load.set()
        await asyncio.gather(*load)
        settle_s = await _settle(sampler, tenants, args.settle_timeout_s)
        leaked_in_stream = await sampler.left_in_stream(ledger)
        stop_sampling.set()
        await sampling
    finally:
        for tenant_clients in clients.values():
            await tenant_clients.close()
        await sampler.close()
        exit_code = await asyncio.to_thread(stack.stop_engram)
    try:
        audit = await audit_store(stack.data_dir, tenants, ledger, sampler.faded_turns())
    finally:
        await asyncio.to_thread(stack.stop)
    if not args.keep_data:
        shutil.rmtree(folder, ignore_errors=True)
    samples = as_rows(sampler.samples)
    latency = percentiles([ms for _, ms in ledger.recalls])
    return {
        "machine": describe(),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "throughput": {"turns_per_s": published / load_s, "load_s": load_s,
                       "publish_retries": ledger.publish_retries, "flushes": ledger.flushes},
        "settle_s": settle_s, "settled": settle_s is not None, "engram_exit_code": exit_code,
        "recall": {**latency.model_dump(), "errors": dict(ledger.recall_errors)},
        "resources": soak_report.summary(samples), "memory": soak_report.memory_growth(samples, load_s),
        "chaos": {"engram_kills": stack.engram_kills, "nats_restarts": stack.nats_restarts, "events": ledger.chaos},
        "forgets": ledger.forgets, "consolidations": ledger.consolidations,
        "forgotten_events": sampler.forgotten_reasons,
        "audit": audit.as_dict(), "failures": audit.failures, "leaked_in_stream": leaked_in_stream,
        "buckets": soak_report.buckets(samples, ledger.recalls, ledger.recall_error_times, args.bucket_s,
                                       samples[-1]["t_s"] if samples else 0.0),
        "samples": samples, "recalls": [[round(t, 2), round(ms, 2)] for t, ms in ledger.recalls],
    }


def passed(results: dict[str, Any]) -> bool:
    """No turn lost, stored twice, left behind after a forget (in entries or the stream), or never published."""
    audit = results["audit"]
    return bool(results["failures"] == 0 and results["leaked_in_stream"] == 0 and audit["phantom"] == 0
            and audit["unpublished"] == 0 and results["settled"])


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration-s", type=float, default=180.0, help="how long the load runs")
    p.add_argument("--quiet-tail-s", type=float, default=0.0,
                   help="after the load, this long with no turns published (recalls and consolidations go on): once "
                        "the last windows are written the store holds still, so memory growth there is growth "
                        "with time")
    p.add_argument("--rate", type=float, default=15.0, help="turns published per second, over all users")
    p.add_argument("--tenants", type=int, default=3)
    p.add_argument("--users", type=int, default=4, help="users per tenant")
    p.add_argument("--conversations", type=int, default=2, help="conversations each user has going at once")
    p.add_argument("--recall-rate", type=float, default=2.0, help="recalls per second, over all tenants")
    p.add_argument("--consolidate-every-s", type=float, default=20.0, help="a consolidate request, tenant by tenant")
    p.add_argument("--forget-users", type=int, default=1, help="users forgotten whole mid-run")
    p.add_argument("--forget-conversations", type=int, default=2, help="single conversations forgotten mid-run")
    p.add_argument("--kill-every-s", type=float, default=0.0, help="SIGKILL and restart engram this often (0: never)")
    p.add_argument("--restart-nats-every-s", type=float, default=0.0,
                   help="kill and restart nats-server this often, same port and JetStream folder (0: never)")
    p.add_argument("--bucket-s", type=float, default=10.0, help="time bucket of the per-bucket table")
    p.add_argument("--settle-timeout-s", type=float, default=420.0,
                   help="how long to wait for everything to settle (longer than engram's idle timeout, 300 s)")
    p.add_argument("--engram-env", action="append", default=[], metavar="KEY=VALUE",
                   help="an ENGRAM_* setting for the engram process (repeatable)")
    p.add_argument("--keep-data", action="store_true", help="keep the NATS and engram data in --out/stack")
    p.add_argument("--out", type=Path, default=Path("bench-out/soak"))
    p.add_argument("--seed", type=int, default=7)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the soak, print the tables, write results.json and soak.png; 0 when every turn is accounted for."""
    args = parser().parse_args(argv)
    if any("=" not in item for item in args.engram_env):
        raise SystemExit("--engram-env takes KEY=VALUE")
    logging.basicConfig(level=logging.WARNING)
    console = Console(width=160)  # the tables are wide; a pipe would get 80 columns
    results = asyncio.run(run(args))
    soak_report.print_tables(results, console)
    for path in soak_report.write(results, args.out):
        console.print(f"wrote {path}")
    ok = passed(results)
    console.print("[bold green]every turn accounted for[/bold green]" if ok else
                  "[bold red]accounting failed[/bold red]: see the tables above")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
