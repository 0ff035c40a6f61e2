"""Reading a running engram's /metrics as Prometheus would."""
import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return str(reply.read().decode())


async def metric(port: int, name: str, **labels: str) -> float:
    """The sum of the samples named `name` (a counter's `_total` included) whose labels include `labels`."""
    text = await asyncio.to_thread(_scrape, port)
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total
