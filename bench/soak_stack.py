"""The soak's stack: nats-server and `engram up` as separate processes that the chaos can kill and restart."""
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from shared.messaging import nats_server
from shared.messaging.nats_server import EmbeddedNats

START_TIMEOUT_S = 180.0
READY_LINE = b"engram is up"


def rss_mb(pid: int, field: str = "VmRSS") -> float | None:
    """Resident memory of a process (`field` of /proc/<pid>/status: VmRSS in all, RssAnon its own heap, which a
    leak grows, RssFile the mapped files such as the store's segments), in MB; None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return None
    return None


@dataclass
class SoakStack:
    """One nats-server and one `engram up` process against it, in `folder`, with counts of what chaos did."""

    folder: Path
    engram_env: dict[str, str] = field(default_factory=dict)
    nats: EmbeddedNats | None = None
    engram: subprocess.Popen[bytes] | None = None
    engram_kills: int = 0
    nats_restarts: int = 0
    _log_offset: int = 0

    @property
    def data_dir(self) -> Path:
        """engram's data folder (its Qdrant Edge shard is in `qdrant/` below it)."""
        return self.folder / "data"

    @property
    def log_path(self) -> Path:
        """Where engram's output goes (appended across restarts)."""
        return self.folder / "engram.log"

    @property
    def nats_url(self) -> str:
        """The NATS URL, the same across NATS restarts (same port)."""
        assert self.nats is not None, "start() first"
        return self.nats.url

    @property
    def engram_pid(self) -> int | None:
        """The PID of the running engram process, if any."""
        if self.engram is None or self.engram.poll() is not None:
            return None
        return self.engram.pid

    def start(self) -> None:
        """Start nats-server, then engram, and wait until engram says it is up."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.nats = nats_server.start(self.folder / "nats")
        self.start_engram()

    def start_engram(self) -> None:
        """Start `python -m services.cli up` against the NATS server and wait for its ready line."""
        env = {**os.environ, "ENGRAM_NATS_URL": self.nats_url, "ENGRAM_DATA_DIR": str(self.data_dir),
               "ENGRAM_HTTP_PORT": "0", "ENGRAM_LOG_LEVEL": "WARNING", **self.engram_env}
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.engram = subprocess.Popen([sys.executable, "-m", "services.cli", "up"], env=env, stdout=log,
                                           stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while READY_LINE not in self._new_log():
            if self.engram.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"engram up did not start: {self._new_log()[-3000:].decode(errors='replace')}")
            time.sleep(0.1)

    def _new_log(self) -> bytes:
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            return log.read()

    def kill_engram(self) -> None:
        """SIGKILL engram, as a crash or an OOM kill would."""
        if self.engram is not None and self.engram.poll() is None:
            self.engram.send_signal(signal.SIGKILL)
            self.engram.wait()
            self.engram_kills += 1

    def restart_nats(self) -> None:
        """Kill nats-server at once and start it again on the same port with the same JetStream folder."""
        assert self.nats is not None, "start() first"
        self.nats.kill()
        self.nats = nats_server.start(self.nats.store_dir, port=self.nats.port)
        self.nats_restarts += 1

    def stop_engram(self, timeout_s: float = 60.0) -> int | None:
        """Stop engram gracefully (SIGTERM: consumers stop, sealed windows are written); its exit code."""
        if self.engram is None:
            return None
        if self.engram.poll() is None:
            self.engram.send_signal(signal.SIGTERM)
            try:
                self.engram.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.engram.kill()
                self.engram.wait()
        return self.engram.returncode

    def stop(self) -> None:
        """Stop engram, then nats-server."""
        self.stop_engram()
        if self.nats is not None:
            self.nats.stop()
