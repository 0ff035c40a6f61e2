"""A real engram stack for benchmarks: nats-server and `engram up` as separate processes, as in production."""
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from shared.messaging import nats_server


@contextlib.contextmanager
def engram_up(folder: Path, extra_env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Start nats-server and `engram up` against it; yields the NATS URL; stops both on exit.

    Args:
        extra_env: more ENGRAM_* variables for the engram process (e.g. a limit a benchmark compares).
    """
    server = nats_server.start(folder / "nats")
    env = {**os.environ, "ENGRAM_NATS_URL": server.url, "ENGRAM_DATA_DIR": str(folder / "data"),
           "ENGRAM_HTTP_PORT": "0", "ENGRAM_LOG_LEVEL": "WARNING", **(extra_env or {})}
    log = (folder / "engram.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "services.cli", "up"], env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while b"engram is up" not in (folder / "engram.log").read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"engram up did not start: {(folder / 'engram.log').read_text()[-2000:]}")
            time.sleep(0.1)
        yield server.url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        server.stop()
