"""`engram demo`: ingest a small bundled chat and show a few recalls (starting engram when none answers)."""
import time
from importlib import resources
from pathlib import Path

from engram_client.errors import EngramError
from services.cli.base import NatsOpt, TenantOpt, connect_client, console, load_settings, nats_url, run
from services.cli.commands import publish_file
from services.cli.embedded import embedded_stack
from shared.evaluation.latency import percentiles
from shared.settings import Settings

QUESTIONS = ["Where did Maya travel and why?", "What is Maya training for, and when is it?",
             "What is the name of Maya's dog?", "Why does Maya need protein ideas?",
             "Who did Maya meet at the conference?"]
SAMPLE = "demo.jsonl"


async def _show(url: str, settings: Settings, tenant: str) -> None:
    sample = Path(str(resources.files("services") / "samples" / SAMPLE))
    await publish_file(url, tenant, sample, wait=True, prefix=settings.subject_prefix, timeout_s=120)
    latencies = []
    async with await connect_client(url, tenant, settings.subject_prefix) as client:
        for question in QUESTIONS:
            started = time.perf_counter()
            reply = await client.recall(question, k=2, user_id="user-maya")
            latencies.append((time.perf_counter() - started) * 1e3)
            console.rule(f"[bold]{question}")
            for entry in reply.entries:
                console.print(f"[green]{entry.score:.3f}[/green] {entry.text}\n")
    console.print(f"[dim]recall round trip: median {percentiles(latencies).p50:.1f} ms over "
                  f"{len(latencies)} questions[/dim]")


async def _answers(url: str, settings: Settings, tenant: str) -> bool:
    try:
        client = await connect_client(url, tenant, settings.subject_prefix, timeout_s=2,
                                            first_connect_timeout_s=2)
    except EngramError:
        return False
    try:
        await client.entries(op="list", limit=1)
        return True
    except EngramError:
        return False
    finally:
        await client.close()


async def _demo(settings: Settings, given: str | None, tenant: str) -> None:
    url = nats_url(settings, given)
    if await _answers(url, settings, tenant):
        await _show(url, settings, tenant)
        return
    console.print(f"[yellow]no engram answers at {url}; starting an embedded one for the demo[/yellow]")
    async with embedded_stack(settings, "demo", idle_timeout_s=5.0) as state:
        await _show(state.nats_url, settings, tenant)


def demo(tenant: TenantOpt = "demo", nats: NatsOpt = None) -> None:
    """Ingest a small bundled conversation and show a few recalls (starts engram if none answers)."""
    settings = load_settings()
    run(_demo(settings, nats, tenant))
