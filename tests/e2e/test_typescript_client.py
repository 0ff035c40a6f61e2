"""The TypeScript client (clients/typescript, on nats.js) against a real `engram up` in its own process: the whole
flow, every error code it can provoke, the retry hint; its own tests (node's test runner) say what they check."""
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.node import TS_CLIENT, installed, node_tools
from tests.support.polling import eventually

UP_TIMEOUT_S = 120


@pytest.fixture
async def engram_up(tmp_path: Path) -> AsyncIterator[str]:
    """`engram up` on free ports (embedded nats-server, Qdrant Edge in tmp_path), as a product would run it; one
    recall worker per tenant (2 workers, half each) and no queue, so a burst of recalls is refused with a retry
    hint."""
    log = tmp_path / "engram.log"
    env = {**os.environ, "ENGRAM_DATA_DIR": str(tmp_path / "data"), "ENGRAM_NATS_PORT": "0",
           "ENGRAM_HTTP_PORT": "0", "ENGRAM_SWEEP_INTERVAL_S": "0.2", "ENGRAM_SEAL_GRACE_S": "1",
           "ENGRAM_IDLE_TIMEOUT_S": "2", "ENGRAM_RECALL_WORKERS": "2", "ENGRAM_RECALL_TENANT_SHARE": "0.5",
           "ENGRAM_RECALL_TENANT_QUEUE": "0", "COLUMNS": "300"}
    env.pop("ENGRAM_NATS_URL", None)
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "services.cli", "up"], env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        def up() -> re.Match[str] | None:
            assert proc.poll() is None, log.read_text()[-3000:]  # it exited: its log says why
            return re.search(r"engram is up\s+NATS (nats://\S+)", log.read_text(errors="replace"))

        found = await eventually(up, timeout_s=UP_TIMEOUT_S)
        yield found.group(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_the_typescript_client_against_engram_up(engram_up: str) -> None:
    """`npm test` in clients/typescript: tsc builds the client and its tests, node's test runner runs them."""
    _, npm = node_tools()
    installed(TS_CLIENT)
    done = subprocess.run([npm, "test", "--silent"], cwd=TS_CLIENT, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "ENGRAM_NATS_URL": engram_up})
    print(done.stdout[-4000:])
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-4000:]
    assert re.search(r"# fail 0\b", done.stdout) and re.search(r"# pass [1-9]", done.stdout), done.stdout
