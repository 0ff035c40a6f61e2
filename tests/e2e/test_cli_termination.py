"""A command that started an embedded stack (`engram eval`, `engram demo`) and is stopped by SIGTERM stops the
nats-server it started and removes its temporary folder, as it does on Ctrl-C: nothing is left running."""
import asyncio
import os
import signal
import sys
from pathlib import Path

from services.cli.base import TERMINATED
from tests.support.polling import eventually
from tests.support.processes import nats_servers_under


async def test_sigterm_stops_the_embedded_nats_server_and_removes_the_folder(tmp_path: Path) -> None:
    """`engram eval updates`, sent SIGTERM twice once its nats-server runs, exits 143 and leaves no server or
    folder."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli", "eval", "updates", "--split", "dev", "--out", str(tmp_path / "out"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={"ENGRAM_LOG_LEVEL": "WARNING", "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    try:
        await eventually(lambda: asyncio.to_thread(nats_servers_under, tmp_path), bool, timeout_s=60)
        os.kill(proc.pid, signal.SIGTERM)
        await asyncio.sleep(0.05)
        os.kill(proc.pid, signal.SIGTERM)  # a second one while it stops is ignored, not a kill mid-way
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
        assert proc.returncode == TERMINATED, out.decode()
        assert "terminated (SIGTERM)" in out.decode()
        await eventually(lambda: asyncio.to_thread(nats_servers_under, tmp_path), lambda left: not left, timeout_s=10)
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("engram-")]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        for pid in nats_servers_under(tmp_path):  # what a failing run left behind
            os.kill(pid, signal.SIGKILL)
