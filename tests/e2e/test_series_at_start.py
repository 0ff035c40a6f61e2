"""Every metric deploy/ reads has a series on each service's /metrics right after start-up, before any traffic."""
import os
import subprocess
import sys
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from shared.messaging.nats_server import free_port
from tests.support.monitoring import used_metric_names
from tests.support.polling import eventually

SERVICES = ("ingestor", "retriever", "consolidator")


def start_service(service: str, nats_url: str, folder: Path, http_port: int) -> subprocess.Popen[bytes]:
    """`engram <service>` as its own process (a fresh metrics registry), with its own data folder and port."""
    env = {**os.environ, "ENGRAM_NATS_URL": nats_url, "ENGRAM_DATA_DIR": str(folder / service),
           "ENGRAM_HTTP_PORT": str(http_port)}
    with (folder / f"{service}.log").open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "services.cli", service], env=env, stdout=out,
                                stderr=subprocess.STDOUT)


def series_names(exposition: str) -> set[str]:
    """The sample names that have at least one series (a labelled metric never used has none)."""
    return {sample.name for family in text_string_to_metric_families(exposition) for sample in family.samples}


async def test_every_metric_deploy_reads_has_a_series_on_each_service_after_start_up(nats_url: str,
                                                                                    tmp_path: Path) -> None:
    """Each of the three services, started as its own process and sent no traffic, exposes at least one series of
    every `engram_*` name the alert rules, recording rules and dashboard read: a rate over a series that does not
    exist never fires an alert and leaves a panel with "no data"."""
    used = used_metric_names()
    ports = {service: free_port() for service in SERVICES}
    processes = {service: start_service(service, nats_url, tmp_path, ports[service]) for service in SERVICES}
    missing: dict[str, set[str]] = {}
    try:
        async with httpx.AsyncClient(timeout=5) as http:

            async def ready(port: int) -> bool:
                try:
                    return (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            for service, port in ports.items():
                await eventually(lambda p=port: ready(p), timeout_s=90, interval_s=0.2)  # type: ignore[misc]
                exposition = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
                missing[service] = used - series_names(exposition)
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    on_none = set.intersection(*missing.values())
    print(f"\n{len(used)} metric names in deploy/; without a series after start-up: "
          + ", ".join(f"{service} {len(names)}" for service, names in missing.items())
          + f"; on none of the three: {len(on_none)} {sorted(on_none)}")
    for service, names in missing.items():
        assert not names, f"{service}: no series for {sorted(names)}"
