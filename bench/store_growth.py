"""`python -m bench.store_growth [--entries N] [--text-words W] [--rewrite-s S] [--rate R]`: how the process that
writes entries into Qdrant Edge grows, entry by entry, and how much of it the allocator could give back; then how
the store's folder grows when the same entries' payloads are rewritten, as a recall's bookkeeping does.

The soak's heap grew with the windows written and held flat for a while after; this measures the store alone, in
one fresh process, one entry per upsert (as the closer writes a window): anonymous memory (`RssAnon`, the
engine's own heap) every tenth of the way, and again after `malloc_trim(0)` asks glibc to return what is free
(the trim stays in effect: the next tenth grows from there).

Then payload updates of 10 entries each, `--rate` per second for `--rewrite-s` (`access_count` and
`last_accessed_at`, what recording a recall's use writes), with the store's folder size every tenth of the time
and its file-backed memory (`RssFile`) before and after: the store holds the same entries, so growth there is
growth with traffic, not with what is stored. The engine reuses the space a rewrite frees only after a flush (the
store flushes every `FLUSH_S`), so the folder grows by what one flush interval rewrites and then holds.
Prints the tables and, on the last line, the figures as JSON.
"""
import argparse
import asyncio
import ctypes
import json
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from bench.memory import status_mb
from bench.scale import DIM, _unit, _words
from shared.embedding import Bm25Encoder
from shared.store import EdgeStore, MemoryEntry, Scope, StoredEntry, Vectors

SAMPLES = 10


def _trim() -> None:
    """Ask glibc to give free heap back to the system (a no-op where there is no glibc)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        return


def _folder_mb(folder: Path) -> float:
    return int(subprocess.check_output(["du", "-sk", str(folder)]).split()[0]) / 1024


async def _rewrite(store: EdgeStore, folder: Path, entries: int, seconds: float, rate: float) -> dict[str, Any]:
    """Payload updates of 10 random entries each, `rate` per second for `seconds`; the folder and RssFile before,
    every tenth of the time, and after."""
    rng = np.random.default_rng(7)
    before = {"folder_mb": _folder_mb(folder), "file_mb": status_mb()["file_mb"]}
    stamp = datetime.now(UTC).isoformat()
    samples: list[dict[str, float]] = []
    started = time.perf_counter()
    done = 0
    while (elapsed := time.perf_counter() - started) < seconds:
        if done < elapsed * rate:
            picked = [str(uuid.UUID(int=int(n) + 1)) for n in rng.choice(entries, 10, replace=False)]
            await store.set_payload(Scope(tenant_id="t"), picked, {"access_count": done, "last_accessed_at": stamp})
            done += 1
        else:
            await asyncio.sleep(1 / rate)
        if elapsed >= (len(samples) + 1) * seconds / SAMPLES:
            samples.append({"seconds": round(elapsed, 1), "rewrites": done, "folder_mb": round(_folder_mb(folder), 1)})
    after = {"folder_mb": _folder_mb(folder), "file_mb": status_mb()["file_mb"]}
    return {"seconds": seconds, "rate": rate, "rewrites": done, "entries_per_rewrite": 10, "before": before,
            "after": after, "samples": samples}


async def grow(entries: int, words: int, rewrite_s: float = 0.0, rate: float = 50.0) -> dict[str, Any]:
    """Write `entries` entries one at a time; anonymous memory before and after a trim at every tenth; then
    payload rewrites of 10 entries each, `rate` per second for `rewrite_s`."""
    rng = np.random.default_rng(5)
    bm25 = Bm25Encoder("english")
    now = datetime.now(UTC)
    rows = []
    with tempfile.TemporaryDirectory(prefix="engram-store-growth-") as folder:
        store = EdgeStore.open(Path(folder) / "edge", DIM)
        base = status_mb()["anon_mb"]
        step = max(1, entries // SAMPLES)
        for first in range(0, entries, step):
            count = min(step, entries - first)
            texts, vectors = _words(rng, count, words), _unit(rng, count)
            for i in range(count):
                n = first + i
                entry = MemoryEntry(id=str(uuid.UUID(int=n + 1)), tenant_id="t", user_id=f"u{n % 100}",
                                    conversation_id=f"c{n // 10}", text=texts[i], occurred_at=now, created_at=now,
                                    updated_at=now, source_turn_ids=[str(n)])
                await store.upsert([StoredEntry(entry=entry, vectors=Vectors(
                    dense=vectors[i].tolist(), sparse=bm25.document(texts[i], "english")))])
            held = status_mb()["anon_mb"] - base
            _trim()
            rows.append({"entries": first + count, "anon_mb": round(held, 1),
                         "after_trim_mb": round(status_mb()["anon_mb"] - base, 1)})
        rewritten = await _rewrite(store, Path(folder) / "edge", entries, rewrite_s, rate)
        await store.close()
    last = rows[-1]
    return {"entries": entries, "text_words": words, "rows": rows,
            "kb_per_entry": round(last["anon_mb"] * 1024 / entries, 2),
            "trim_gives_back_mb": round(last["anon_mb"] - last["after_trim_mb"], 1), "rewrites": rewritten}


def main() -> None:
    """Run and print the table, then the JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.store_growth", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=30_000)
    parser.add_argument("--text-words", type=int, default=120, help="words per entry's text (a window's worth)")
    parser.add_argument("--rewrite-s", type=float, default=60.0,
                        help="then rewrite payloads this long (several of the store's flush intervals)")
    parser.add_argument("--rate", type=float, default=50.0, help="payload updates of 10 entries per second")
    args = parser.parse_args()
    result = asyncio.run(grow(args.entries, args.text_words, args.rewrite_s, args.rate))
    table = Table(title=f"Qdrant Edge, one process writing {args.entries:,} entries one by one")
    for column in ("entries", "RssAnon growth MB", "after malloc_trim MB"):
        table.add_column(column, justify="right")
    for row in result["rows"]:
        table.add_row(f"{row['entries']:,}", f"{row['anon_mb']:.1f}", f"{row['after_trim_mb']:.1f}")
    Console().print(table)
    rewritten = result["rewrites"]
    Console().print(f"{rewritten['rewrites']:,} payload rewrites of 10 entries in {rewritten['seconds']:g} s: folder "
                    f"{rewritten['before']['folder_mb']:.1f} -> {rewritten['after']['folder_mb']:.1f} MB "
                    f"({', '.join(str(x['folder_mb']) for x in rewritten['samples'])}), RssFile "
                    f"{rewritten['before']['file_mb']:.1f} -> {rewritten['after']['file_mb']:.1f} MB")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
