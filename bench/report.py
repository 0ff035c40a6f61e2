"""Benchmark results as tables on the terminal, JSON, and PNG plots."""
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def print_tables(results: dict[str, Any], console: Console) -> None:
    """One table per benchmark."""
    machine = results["machine"]
    console.print(f"machine: {machine['cores']} cores, {machine['memory_gb']} GB, Python {machine['python']}")
    if "pipeline" in results:
        ingest = results["pipeline"]["ingest"]
        table = Table(title="ingest: publish → recallable vs the embedder alone (same texts, same run)")
        for column in ("turns", "end-to-end turns/s", "embedder alone turns/s", "efficiency"):
            table.add_column(column, justify="right")
        table.add_row(str(ingest["turns"]), f"{ingest['end_to_end_turns_per_s']:.1f}",
                      f"{ingest['embedder_alone_turns_per_s']:.1f}", f"{ingest['efficiency']:.2f}")
        console.print(table)
        recall = results["pipeline"]["recall"]
        table = Table(title="recall over NATS vs the floor (query embedding + store query alone)")
        for column in ("clients", "requests", "errors", "req/s", "p50 ms", "p95 ms", "p99 ms", "p50 / floor p50"):
            table.add_column(column, justify="right")
        floor = recall["floor"]
        table.add_row("floor", "", "", "", f"{floor['p50']:.1f}", f"{floor['p95']:.1f}", f"{floor['p99']:.1f}", "1.00")
        for row in recall["load"]:
            table.add_row(str(row["concurrency"]), str(row["requests"]), str(row["errors"]),
                          f"{row['requests_per_s']:.1f}", f"{row['p50']:.1f}", f"{row['p95']:.1f}",
                          f"{row['p99']:.1f}", f"{row['p50'] / floor['p50']:.2f}")
        by_budget = recall.get("by_budget")
        if by_budget:
            table.add_row(f"1, by {by_budget['token_budget']:,} tokens (no k)", str(by_budget["requests"]),
                          str(by_budget["errors"]), f"{by_budget['requests_per_s']:.1f}", f"{by_budget['p50']:.1f}",
                          f"{by_budget['p95']:.1f}", f"{by_budget['p99']:.1f}",
                          f"{by_budget['p50'] / floor['p50']:.2f}")
        during = recall.get("during_ingest")
        if during:
            table.add_row(f"1, while {during['turns']:,} turns ingest", str(during["n"]), str(during["errors"]), "",
                          f"{during['p50']:.1f}", f"{during['p95']:.1f}", f"{during['p99']:.1f}",
                          f"{during['p50'] / floor['p50']:.2f}")
        console.print(table)
        if during:
            console.print(f"meanwhile {during['turns']:,} turns of another user were stored at "
                          f"{during['ingest_turns_per_s']:.1f} turns/s (publish → recallable)")
    if "sweep" in results:
        sweep = results["sweep"]
        table = Table(title=f"idle detection with {sweep['idle_keys']:,} finished conversations and "
                            f"{sweep['open_conversations']} open ones in working memory")
        for column in ("sweep", "buffers read", "ms"):
            table.add_column(column, justify="right")
        for label, key in (("open index, nothing due", "sweep_nothing_due"),
                           ("open index, every open one due", "sweep_all_open_due"),
                           ("old: list every key, read every buffer", "old_sweep_every_key")):
            table.add_row(label, f"{sweep[key]['read']:,}", f"{sweep[key]['ms']:.1f}")
        table.add_row("open index listing at start-up", f"{sweep['open_conversations']}",
                      f"{sweep['index_listing_ms']:.1f}")
        console.print(table)
    if "consolidation" in results:
        _consolidation(results["consolidation"], console)
    if "console" in results:
        _console(results["console"], console)
    if "scale" in results:
        table = Table(title="scale: synthetic entries, 100 tenants x 100 users, precomputed query vectors")
        for column in ("backend", "entries", "upserts/s", "index build s", "store p50 ms", "store p95 ms",
                       "store with ranks p50 ms", "recall p50 ms", "recall p95 ms", "cold recall p50 ms",
                       "hits per recall", "service RSS MB", "anonymous MB", "build RSS MB", "disk MB"):
            table.add_column(column, justify="right")
        for row in results["scale"]["rows"]:
            table.add_row(row["backend"], f"{row['entries']:,}", f"{row['upsert_per_s']:.0f}",
                          f"{row['index_build_s']:.1f}", f"{row['store_query_ms']['p50']:.2f}",
                          f"{row['store_query_ms']['p95']:.2f}",
                          "" if "store_ranked_ms" not in row else f"{row['store_ranked_ms']['p50']:.2f}",
                          f"{row['recall_ms']['p50']:.2f}",
                          f"{row['recall_ms']['p95']:.2f}",
                          "" if row.get("recall_cold_p50_ms") is None else f"{row['recall_cold_p50_ms']:.2f}",
                          f"{row['recall_ms'].get('hits', 0):.1f}",
                          "" if row["rss_mb"] is None else f"{row['rss_mb']:.0f}",
                          "" if row.get("anon_mb") is None else f"{row['anon_mb']:.0f}",
                          "" if row.get("build_rss_mb") is None else f"{row['build_rss_mb']:.0f}",
                          "" if row["disk_mb"] is None else f"{row['disk_mb']:.0f}")
        console.print(table)
        scale = results["scale"]
        ratio = scale["p50_ratio_largest_to_smallest"]
        console.print(f"recall p50 at the largest size / at the smallest: {ratio:.2f}; "
                      f"per 100k entries: a service holds {scale['rss_mb_per_100k']:.0f} MB resident "
                      f"({scale['anon_mb_per_100k']:.0f} MB anonymous, the rest mapped shard files), "
                      f"the building process {scale['build_rss_mb_per_100k']:.0f} MB, "
                      f"{scale['disk_mb_per_100k']:.0f} MB on disk")


def write(results: dict[str, Any], out: Path) -> list[Path]:
    """results.json plus one PNG per benchmark in `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = [out / "results.json"]
    written[0].write_text(json.dumps(results, indent=2, default=str))
    if "pipeline" in results:
        recall = results["pipeline"]["recall"]
        load = recall["load"]
        fig, ax = plt.subplots(figsize=(6, 4))
        clients = [r["concurrency"] for r in load]
        for key, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^:")):
            ax.plot(clients, [r[key] for r in load], style, label=f"engram {key}")
        during = recall.get("during_ingest")
        if during:
            ax.plot([1], [during["p50"]], "D", color="purple", label="1 client during ingest, p50")
            ax.plot([1], [during["p99"]], "v", color="red", label="1 client during ingest, p99")
        ax.axhline(recall["floor"]["p50"], color="grey", label="floor p50")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("recall latency (ms)")
        ax.set_title("Recall over NATS vs the floor")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "recall.png", dpi=120)
        plt.close(fig)
        written.append(out / "recall.png")
    if "scale" in results:
        edge = [r for r in results["scale"]["rows"] if r["backend"] == "qdrant-edge"]
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        sizes = [r["entries"] for r in edge]
        left.plot(sizes, [r["store_query_ms"]["p50"] for r in edge], "o-", label="store p50")
        left.plot(sizes, [r["recall_ms"]["p50"] for r in edge], "s-", label="recall p50 (no model)")
        left.plot(sizes, [r["recall_ms"]["p95"] for r in edge], "s--", label="recall p95 (no model)")
        left.set_xscale("log")
        left.set_xlabel("entries")
        left.set_ylabel("ms")
        left.set_title("Latency vs size (Qdrant Edge)")
        left.legend()
        right.plot(sizes, [r["rss_mb"] for r in edge], "o-", label="service resident MB")
        right.plot(sizes, [r["anon_mb"] for r in edge], "^-", label="of which anonymous MB")
        right.plot(sizes, [r["disk_mb"] for r in edge], "s-", label="disk MB")
        right.set_xscale("log")
        right.set_yscale("log")
        right.set_xlabel("entries")
        right.set_title("Memory and disk vs size")
        right.legend()
        fig.tight_layout()
        fig.savefig(out / "scale.png", dpi=120)
        plt.close(fig)
        written.append(out / "scale.png")
    return written


def _consolidation(result: dict[str, Any], console: Console) -> None:
    table = Table(title="consolidation: one tenant, 1,000 users (one with 40,000 episodes), scheduled runs")
    for column in ("entries", "users", "fill s", "first run s", "first run peak MB", "quiet-slot run s",
                   "quiet-slot peak MB", "big-user slot run s", "big-user slot peak MB"):
        table.add_column(column, justify="right")
    for row in result["rows"]:
        big = row.get("big_user_run", {"run_s": float("nan"), "peak_mb": float("nan")})
        table.add_row(f"{row['entries']:,}", f"{row['users']:,}", f"{row['fill']['fill_s']:.0f}",
                      f"{row['first_run']['run_s']:.1f}", f"{row['first_run']['peak_mb']:.0f}",
                      f"{row['quiet_run']['run_s']:.2f}", f"{row['quiet_run']['peak_mb']:.0f}",
                      f"{big['run_s']:.2f}", f"{big['peak_mb']:.0f}")
    console.print(table)
    console.print(f"quiet slot: {result['rows'][0]['touched']['touched_users']} ordinary users got "
                  f"{result['rows'][0]['touched']['new_episodes']} new episodes before the run; big-user slot: "
                  "the user with 40,000 episodes got 20 more")
    sched = result["scheduler"]
    table = Table(title=f"the scheduler's pass over {sched['tenants']:,} tenants")
    for column in ("first pass (every tenant new) s", "nothing due s", f"{sched['due']} due s", "peak MB"):
        table.add_column(column, justify="right")
    table.add_row(f"{sched['first_seen_s']:.2f}", f"{sched['nothing_due_s']:.2f}", f"{sched['some_due_s']:.2f}",
                  f"{sched['peak_mb']:.0f}")
    console.print(table)


def _console(result: dict[str, Any], console: Console) -> None:
    kinds = ", ".join(f"{n:,} {kind}" for kind, n in result["kinds"].items())
    budget = result["budget_ms"]
    table = Table(title=f"console pages for one user with {result['entries']:,} entries ({kinds}; "
                        f"{result['superseded']} superseded; {result['conversations']} conversations over "
                        f"{result['days']} days), {result['rounds']} rounds, over HTTP")
    for column in ("page", "p50 ms", "p95 ms", "max ms", f"p95 within {budget:.0f} ms", "NATS requests",
                   "KB from NATS", "KB sent"):
        table.add_column(column, justify="right")
    for row in [*result["pages"], result["download"]]:
        low, high = row["nats_requests_min"], row["nats_requests_max"]
        table.add_row(row["page"], f"{row['p50']:.0f}", f"{row['p95']:.0f}", f"{row['max']:.0f}",
                      ("yes" if row["within_budget"] else "[red]no[/red]") if row is not result["download"]
                      else "(a download)", str(low) if low == high else f"{low}-{high}", f"{row['nats_kb']:.0f}",
                      f"{row['response_kb']:.0f}", end_section=row is result["pages"][-1])
    console.print(table)
    console.print(f"{result['entries']:,} entries imported in {result['fill_s']:.1f} s; every page within "
                  f"{budget:.0f} ms at p95: {'yes' if result['all_within_budget'] else 'no'}")
