"""A real engram stack scraped by the real Prometheus: every metric deploy/ reads is exported, the counters reach
Prometheus with the values the traffic made, a recording rule evaluates, and the alerts load healthy."""
import math
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from engram_client import MemoryClient, wait_until_stored
from services.stack import Running, running
from shared.messaging.nats_server import free_port
from shared.settings import Settings
from tests.support.ids import unique
from tests.support.monitoring import EXPECTED_ALERTS, RULES, used_metric_names
from tests.support.polling import eventually
from tests.support.turns import conversation

# What the traffic below must leave non-zero in /metrics (sample name, labels that must match).
DRIVEN: list[tuple[str, dict[str, str]]] = [
    ("engram_turns_total", {"outcome": "accepted"}),
    ("engram_windows_sealed_total", {"reason": "flush"}),
    ("engram_windows_written_total", {}),
    ("engram_entries_written_total", {}),
    ("engram_ingest_stage_seconds_count", {"stage": "embed"}),
    ("engram_window_end_to_end_seconds_count", {}),
    ("engram_recall_requests_total", {"mode": "fast", "outcome": "ok"}),
    ("engram_recall_seconds_count", {"mode": "fast"}),
    ("engram_recall_stage_seconds_count", {"stage": "search"}),
    ("engram_recall_entries_returned_count", {"mode": "fast"}),
    ("engram_recall_context_tokens_count", {"mode": "fast"}),
    ("engram_recall_empty_total", {"mode": "fast"}),
    ("engram_requests_total", {"subject": "recall", "outcome": "invalid_request"}),
    ("engram_consolidation_runs_total", {"trigger": "request", "outcome": "ok"}),
    ("engram_consolidation_last_success_timestamp_seconds", {}),
    ("engram_ready", {}),
    ("engram_build_info", {}),
]
# Kinds of metric whose samples carry a suffix after the family name in the text exposition.
_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created"),
             "summary": ("", "_count", "_sum", "_created"), "info": ("_info",)}


def samples(text: str, name: str, **labels: str) -> list[float]:
    """The values of every sample `name` of an exposition whose labels include `labels`."""
    return [sample.value for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name == name and labels.items() <= sample.labels.items()]


def exposed_names(text: str) -> set[str]:
    """Every sample name an exposition's families can have, whether or not a labelled one has samples yet."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


@dataclass
class Prometheus:
    """A prometheus child process and where its HTTP API answers."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL if it hangs)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_prometheus(folder: Path, target_port: int) -> Prometheus:
    """The real prometheus scraping one engram process every second and evaluating deploy/'s rules."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed; run `make system-deps` (installs Debian's prometheus package)")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES / "*.yml")],
        "scrape_configs": [{"job_name": "engram", "static_configs": [
            {"targets": [f"127.0.0.1:{target_port}"], "labels": {"service": "stack"}}]}],
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = folder / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen([binary, f"--config.file={folder / 'prometheus.yml'}",
                                    f"--storage.tsdb.path={folder / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
                                    "--log.level=warn"], stdout=out, stderr=subprocess.STDOUT)
    return Prometheus(process, f"http://127.0.0.1:{port}", log)


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Running]:
    """One process with the three services, an embedded nats-server and Qdrant Edge, all in tmp_path."""
    settings = Settings(data_dir=tmp_path / "data", nats_port=0, http_port=0, sweep_interval_s=0.2,
                        seal_grace_s=1.0, idle_timeout_s=2.0)
    async with running(settings) as state:
        yield state


@pytest.fixture
def prometheus(stack: Running, tmp_path: Path) -> Iterator[Prometheus]:
    """Prometheus scraping the stack; stopped at teardown."""
    server = start_prometheus(tmp_path / "prometheus", stack.http_port)
    try:
        yield server
    finally:
        server.stop()


async def query(http: httpx.AsyncClient, prometheus: Prometheus, expr: str) -> list[dict[str, Any]]:
    """The result vector of an instant query (empty while Prometheus is starting)."""
    if prometheus.process.poll() is not None:
        raise AssertionError(f"prometheus exited: {prometheus.log.read_text()[-3000:]}")
    try:
        reply = await http.get(f"{prometheus.url}/api/v1/query", params={"query": expr})
    except httpx.TransportError:
        return []
    assert reply.status_code in (200, 503), reply.text  # 503: not ready yet
    result: list[dict[str, Any]] = reply.json()["data"]["result"] if reply.status_code == 200 else []
    return result


def value(result: list[dict[str, Any]]) -> float | None:
    """The value of a one-sample result vector, or None."""
    return float(result[0]["value"][1]) if len(result) == 1 else None


async def test_prometheus_scrapes_the_stack_and_evaluates_the_deploy_rules(stack: Running,
                                                                          prometheus: Prometheus) -> None:
    """Every metric deploy/ reads is exported, traffic moves the main counters by exactly its amount in Prometheus,
    the p99 recording rule evaluates, and every alert loads healthy."""
    base = f"http://127.0.0.1:{stack.http_port}"
    async with await MemoryClient.connect(stack.nats_url, unique("tenant")) as client, httpx.AsyncClient() as http:
        before = (await http.get(f"{base}/metrics")).text  # counters are per process: earlier tests count too
        await eventually(lambda: query(http, prometheus, 'up{job="engram"}'), lambda r: value(r) == 1)

        # One recall first and a scrape after it, so that the fast-mode series exist before the rest of the traffic
        # and rate() sees them grow.
        await client.recall("Has anything been said yet?")
        recalls = 1
        fast_count = sum(samples(before, "engram_recall_seconds_count", mode="fast")) + recalls
        await reaches(http, prometheus, 'sum(engram_recall_seconds_count{mode="fast"})', fast_count)

        turns = conversation([("Ana", "I moved to Lisbon in May."), ("Bo", "Which part of town?"),
                              ("Ana", "Alfama, near the castle. My dog Pico loves the hills.")],
                             conversation_id=unique("c"))
        await client.publish_turns(turns)
        await client.flush(turns[0].conversation_id)
        await wait_until_stored(client, turns, timeout_s=30)
        for question in ("Where does Ana live?", "What is the name of Ana's dog?"):
            found = await client.recall(question)
            assert found.entries
        recalls += 2
        bad = await client.raw_request("recall", b"{not json")
        assert bad["error"]["code"] == "invalid_request"
        await client.consolidate()
        after = (await http.get(f"{base}/metrics")).text

        # (a) the exposition: every name deploy/ reads is there, and the traffic moved the main ones.
        missing = used_metric_names() - exposed_names(after)
        assert missing == set(), "read by deploy/ rules or dashboard but not in /metrics"
        not_moved = [(name, labels) for name, labels in DRIVEN if sum(samples(after, name, **labels)) <= 0]
        assert not_moved == []

        # (b) Prometheus: the counters as the traffic left them, a recording rule, and healthy alert rules.
        expected = {
            'sum(engram_turns_total{outcome="accepted"})':
                sum(samples(before, "engram_turns_total", outcome="accepted")) + len(turns),
            'sum(engram_recall_requests_total{mode="fast", outcome="ok"})':
                sum(samples(before, "engram_recall_requests_total", mode="fast", outcome="ok")) + recalls,
            'sum(engram_recall_seconds_count{mode="fast"})':
                sum(samples(before, "engram_recall_seconds_count", mode="fast")) + recalls,
        }
        for expr, want in expected.items():
            await reaches(http, prometheus, expr, want)
        p99 = await eventually(lambda: query(http, prometheus, 'engram:recall_seconds_p99:5m{mode="fast"}'),
                               lambda r: (v := value(r)) is not None and not math.isnan(v))
        assert 0 < (value(p99) or 0) <= 10  # within the histogram's buckets
        rules = await eventually(lambda: rule_health(http, prometheus),
                                 lambda found: set(found) >= EXPECTED_ALERTS and set(found.values()) == {"ok"})
    assert {name for name in rules if not name.startswith("engram:")} == EXPECTED_ALERTS


async def reaches(http: httpx.AsyncClient, prometheus: Prometheus, expr: str, want: float) -> None:
    """Wait until an instant query's single value is `want`."""
    await eventually(lambda: query(http, prometheus, expr), lambda result: value(result) == want)


async def rule_health(http: httpx.AsyncClient, prometheus: Prometheus) -> dict[str, str]:
    """Each loaded rule's name (alert or record) and health, from /api/v1/rules."""
    try:
        reply = await http.get(f"{prometheus.url}/api/v1/rules")
    except httpx.TransportError:
        return {}
    if reply.status_code != 200:
        return {}
    return {rule["name"]: rule["health"] for group in reply.json()["data"]["groups"] for rule in group["rules"]}
