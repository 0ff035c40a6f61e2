"""`python -m bench.memory FOLDER`: the memory a service holds for a shard, measured in a fresh process.

The process that builds a shard keeps what the build needed (write-ahead log, appendable segments, allocator
arenas); a service that opens the shard later holds far less, and most of it is the shard's files mapped into
memory, which the kernel can page out. This opens the folder, answers queries, and prints, as JSON, how much
the process grew: resident in all, anonymous (the engine's own heap) and file-backed (mapped shard files).
"""
import asyncio
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

from shared.embedding import Bm25Encoder
from shared.store import EdgeStore, Scope, Vectors

QUERIES = 200


RESIDENT = {"VmRSS": "rss_mb", "RssAnon": "anon_mb", "RssFile": "file_mb"}
PEAK = {"VmHWM": "peak_mb"}


def status_mb(wanted: dict[str, str] = RESIDENT) -> dict[str, float]:
    """Fields of /proc/self/status in MB, under the names `wanted` gives them (VmRSS, RssAnon and RssFile)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in wanted:
                out[wanted[key]] = int(line.split()[1]) / 1024
    return out


class PeakSampler:
    """Samples this process's heap (RssAnon) and mapped files (RssFile) every `every_s` on a thread while in use.

    The peaks are sampled, so a lower bound; `samples` and `longest_gap_s` say how closely (the thread needs the
    GIL, which a call into native code may hold).
    """

    def __init__(self, every_s: float = 0.05) -> None:
        self.every_s = every_s
        self.peaks = {"peak_anon_mb": 0.0, "peak_file_mb": 0.0, "samples": 0, "longest_gap_s": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        last = time.monotonic()
        while True:
            now = status_mb()
            self.peaks["peak_anon_mb"] = max(self.peaks["peak_anon_mb"], now["anon_mb"])
            self.peaks["peak_file_mb"] = max(self.peaks["peak_file_mb"], now["file_mb"])
            self.peaks["samples"] += 1
            self.peaks["longest_gap_s"] = max(self.peaks["longest_gap_s"], time.monotonic() - last)
            last = time.monotonic()
            if self._stop.wait(self.every_s):
                return

    def __enter__(self) -> "PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def measure(folder: Path, dim: int, tenants: int, users: int) -> dict[str, float]:
    """Open the shard, run one query per tenant and user pair sampled, and return the growth in MB."""
    before = status_mb()
    store = EdgeStore.open(folder, dim)
    bm25 = Bm25Encoder("english")
    rng = np.random.default_rng(3)
    for i in range(QUERIES):
        dense = rng.standard_normal(dim)
        vectors = Vectors(dense=(dense / np.linalg.norm(dense)).tolist(), sparse=bm25.query(f"w{i} w{i * 7}"))
        await store.hybrid_query(Scope(tenant_id=f"t{i % tenants}", user_id=f"u{(i * 7) % users}"), vectors,
                                 limit=10)
    after = status_mb()
    await store.close()
    return {key: after[key] - before[key] for key in after}


if __name__ == "__main__":
    folder, dim, tenants, users = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps(asyncio.run(measure(folder, dim, tenants, users))))
