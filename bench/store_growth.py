"""`python -m bench.store_growth [--entries N] [--text-words W]`: how the process that writes entries into Qdrant
Edge grows, entry by entry, and how much of it the allocator could give back.

The soak's heap grew with the windows written and held flat for a while after; this measures the store alone, in
one fresh process, one entry per upsert (as the closer writes a window): anonymous memory (`RssAnon`, the
engine's own heap) every tenth of the way, and again after `malloc_trim(0)` asks glibc to return what is free
(the trim stays in effect: the next tenth grows from there).
Prints a table and, on the last line, the figures as JSON.
"""
import argparse
import asyncio
import ctypes
import json
import tempfile
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
from shared.store import EdgeStore, MemoryEntry, StoredEntry, Vectors

SAMPLES = 10


def _trim() -> None:
    """Ask glibc to give free heap back to the system (a no-op where there is no glibc)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        return


async def grow(entries: int, words: int) -> dict[str, Any]:
    """Write `entries` entries one at a time; anonymous memory before and after a trim at every tenth."""
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
        await store.close()
    last = rows[-1]
    return {"entries": entries, "text_words": words, "rows": rows,
            "kb_per_entry": round(last["anon_mb"] * 1024 / entries, 2),
            "trim_gives_back_mb": round(last["anon_mb"] - last["after_trim_mb"], 1)}


def main() -> None:
    """Run and print the table, then the JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.store_growth", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=30_000)
    parser.add_argument("--text-words", type=int, default=120, help="words per entry's text (a window's worth)")
    args = parser.parse_args()
    result = asyncio.run(grow(args.entries, args.text_words))
    table = Table(title=f"Qdrant Edge, one process writing {args.entries:,} entries one by one")
    for column in ("entries", "RssAnon growth MB", "after malloc_trim MB"):
        table.add_column(column, justify="right")
    for row in result["rows"]:
        table.add_row(f"{row['entries']:,}", f"{row['anon_mb']:.1f}", f"{row['after_trim_mb']:.1f}")
    Console().print(table)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
