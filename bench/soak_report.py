"""The soak's results: time buckets, rich tables on the terminal, results.json and soak.png."""
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from shared.evaluation.latency import percentiles


def buckets(samples: list[dict[str, Any]], recalls: list[tuple[float, float]], error_times: list[float],
            bucket_s: float, until_s: float) -> list[dict[str, Any]]:
    """Per `bucket_s` of the run: turns published per second, recall p50/p99, lag and RSS at their worst."""
    out = []
    start = 0.0
    previous = 0
    while start < until_s:
        end = start + bucket_s
        inside = [s for s in samples if start <= s["t_s"] < end]
        latency = percentiles([ms for t, ms in recalls if start <= t < end])
        published = max((s["published"] for s in inside), default=previous)
        lags = [s["lag"] for s in inside if s["lag"] is not None]
        rss = [s["rss_mb"] for s in inside if s["rss_mb"] is not None]
        out.append({"start_s": start, "end_s": end, "turns_per_s": (published - previous) / bucket_s,
                    "recalls": latency.n, "recall_errors": sum(1 for t in error_times if start <= t < end),
                    "p50_ms": latency.p50, "p99_ms": latency.p99, "lag_max": max(lags, default=None),
                    "behind_max": max((s["behind"] for s in inside), default=None),
                    "rss_max_mb": max(rss, default=None)})
        previous, start = published, end
    return out


def _known(samples: list[dict[str, Any]], key: str) -> list[Any]:
    return [s[key] for s in samples if s.get(key) is not None]


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """RSS (start, max, end) and lag (max, end) over the whole run."""
    rss, lag, behind = _known(samples, "rss_mb"), _known(samples, "lag"), _known(samples, "behind")
    anon = _known(samples, "anon_mb")
    return {"rss_mb": {"start": rss[0] if rss else None, "max": max(rss, default=None),
                       "end": rss[-1] if rss else None},
            "anon_mb": {"start": anon[0] if anon else None, "max": max(anon, default=None),
                        "end": anon[-1] if anon else None},
            "lag": {"max": max(lag, default=None), "end": lag[-1] if lag else None},
            "behind": {"max": max(behind, default=None), "end": behind[-1] if behind else None}}


MARKS_S = (600.0, 1800.0, 3600.0)  # the table's points in time: 10, 30 and 60 minutes
WARM_UP_S = 300.0  # the first minutes load the model and open the store: not growth


def _fit(xs: list[float], ys: list[float]) -> float | None:
    """The least-squares slope of ys over xs (None: too few points or no spread)."""
    if len(xs) < 10 or max(xs) - min(xs) <= 0:
        return None
    import numpy as np

    return float(np.polyfit(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float), 1)[0])


def memory_growth(samples: list[dict[str, Any]], load_s: float) -> dict[str, Any]:
    """Resident memory and heap at 10, 30 and 60 minutes, their growth per 100,000 entries while the load writes
    (after the warm-up), and per hour once it stops (the quiet tail: the store's size holds still)."""
    alive = [s for s in samples if s.get("rss_mb") is not None and s.get("anon_mb") is not None]
    marks: list[dict[str, Any]] = []
    for at in (*MARKS_S, alive[-1]["t_s"] if alive else 0.0):
        near = min(alive, key=lambda s: abs(s["t_s"] - at), default=None)
        if near is not None and abs(near["t_s"] - at) <= 30 and near["t_s"] not in [m["t_s"] for m in marks]:
            marks.append({"t_s": near["t_s"], "rss_mb": near["rss_mb"], "anon_mb": near["anon_mb"],
                          "entries": near.get("entries")})
    load = [s for s in alive if WARM_UP_S <= s["t_s"] <= load_s and s.get("entries") is not None]
    tail = [s for s in alive if s["t_s"] >= load_s + WARM_UP_S]  # after the last windows are written

    def per(rows: list[dict[str, Any]], x: str, y: str, scale: float) -> float | None:
        slope = _fit([r[x] for r in rows], [r[y] for r in rows])
        return None if slope is None else slope * scale

    return {"marks": marks,
            "load": {"from_s": WARM_UP_S, "to_s": load_s,
                     "entries": [load[0]["entries"], load[-1]["entries"]] if load else None,
                     "rss_mb_per_100k_entries": per(load, "entries", "rss_mb", 100_000),
                     "heap_mb_per_100k_entries": per(load, "entries", "anon_mb", 100_000),
                     "rss_mb_per_hour": per(load, "t_s", "rss_mb", 3600), "heap_mb_per_hour": per(load, "t_s",
                                                                                              "anon_mb", 3600)},
            "quiet": {"from_s": load_s + WARM_UP_S, "to_s": tail[-1]["t_s"] if tail else None,
                      "entries": [tail[0].get("entries"), tail[-1].get("entries")] if tail else None,
                      "rss_mb_per_hour": per(tail, "t_s", "rss_mb", 3600),
                      "heap_mb_per_hour": per(tail, "t_s", "anon_mb", 3600)}}


def _num(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def print_tables(results: dict[str, Any], console: Console) -> None:
    """Totals and accounting, then the run bucket by bucket."""
    machine, options, audit = results["machine"], results["options"], results["audit"]
    console.print(f"machine: {machine['cores']} cores, {machine['memory_gb']} GB, Python {machine['python']}")
    table = Table(title=f"soak: {options['tenants']} tenants x {options['users']} users x "
                        f"{options['conversations']} live conversations, {options['duration_s']:g} s at "
                        f"{options['rate']:g} turns/s, {options['recall_rate']:g} recalls/s")
    columns = ("turns/s sustained", "published", "stored", "lost", "duplicated", "forgotten", "leaked",
               "faded", "engram kills", "NATS restarts", "settle s")
    for column in columns:
        table.add_column(column, justify="right")
    table.add_row(f"{results['throughput']['turns_per_s']:.1f}", f"{audit['published']:,}", f"{audit['stored']:,}",
                  str(audit["lost"]), str(audit["duplicated"]), f"{audit['forgotten']:,}",
                  str(audit["leaked"] + results["leaked_in_stream"]), str(audit["faded"]),
                  str(results["chaos"]["engram_kills"]), str(results["chaos"]["nats_restarts"]),
                  _num(results["settle_s"]))
    console.print(table)
    recall, res = results["recall"], results["resources"]
    table = Table(title="recall latency, engram RSS and consumer lag over the run")
    for column in ("recalls", "errors", "p50 ms", "p95 ms", "p99 ms", "RSS start MB", "RSS max MB", "RSS end MB",
                   "heap start MB", "heap end MB", "lag max", "lag end", "not stored yet max"):
        table.add_column(column, justify="right")
    table.add_row(f"{recall['n']:,}", str(sum(recall["errors"].values())), _num(recall["p50"]), _num(recall["p95"]),
                  _num(recall["p99"]), _num(res["rss_mb"]["start"], 0), _num(res["rss_mb"]["max"], 0),
                  _num(res["rss_mb"]["end"], 0), _num(res["anon_mb"]["start"], 0), _num(res["anon_mb"]["end"], 0),
                  _num(res["lag"]["max"], 0), _num(res["lag"]["end"], 0), _num(res["behind"]["max"], 0))
    console.print(table)
    table = Table(title=f"per {options['bucket_s']:g} s (the load ran for {results['throughput']['load_s']:.0f} s; "
                        f"later buckets are the wait until everything settled)")
    for column in ("from s", "turns/s", "recalls", "errors", "p50 ms", "p99 ms", "lag max", "not stored yet max",
                   "RSS max MB"):
        table.add_column(column, justify="right")
    for row in results["buckets"]:
        table.add_row(f"{row['start_s']:.0f}", f"{row['turns_per_s']:.1f}", str(row["recalls"]),
                      str(row["recall_errors"]), _num(row["p50_ms"]) if row["recalls"] else "",
                      _num(row["p99_ms"]) if row["recalls"] else "", _num(row["lag_max"], 0),
                      _num(row["behind_max"], 0), _num(row["rss_max_mb"], 0))
    console.print(table)
    growth = results.get("memory")
    if growth:
        table = Table(title="engram memory over time (entries = created minus forgotten, from events)")
        for column in ("at s", "entries", "RSS MB", "heap MB"):
            table.add_column(column, justify="right")
        for mark in growth["marks"]:
            table.add_row(f"{mark['t_s']:.0f}", _num(mark["entries"], 0), _num(mark["rss_mb"], 0),
                          _num(mark["anon_mb"], 0))
        console.print(table)
        load, quiet = growth["load"], growth["quiet"]
        console.print(f"while writing ({load['from_s']:.0f}-{load['to_s']:.0f} s): RSS "
                      f"{_num(load['rss_mb_per_100k_entries'], 0)} MB and heap "
                      f"{_num(load['heap_mb_per_100k_entries'], 0)} MB per 100,000 entries "
                      f"({_num(load['rss_mb_per_hour'], 0)} and "
                      f"{_num(load['heap_mb_per_hour'], 0)} MB per hour); store still "
                      f"({quiet['from_s']:.0f}-{_num(quiet['to_s'], 0)} s, recalls and consolidation going on): RSS "
                      f"{_num(quiet['rss_mb_per_hour'], 1)} and heap {_num(quiet['heap_mb_per_hour'], 1)} MB per hour")
    forgets = results["forgets"]
    consolidations = results["consolidations"]
    console.print(f"forgets: {len(forgets)} ({sum(f['verified'] for f in forgets)} verified by engram); "
                  f"consolidations: {len(consolidations)} "
                  f"({sum('error' in c for c in consolidations)} failed, "
                  f"{sum(c.get('merged', 0) for c in consolidations)} entries merged); "
                  f"publish retries: {results['throughput']['publish_retries']:,}; "
                  f"recall errors: {dict(recall['errors']) or 'none'}")
    console.print(f"entries at the end: {audit['entries']}")
    console.print(f"faded = the turn's only episode was removed by retention (entries_forgotten events whose reason "
                  f"is not a forget request): counted apart, neither stored nor lost. Stream messages of forgotten "
                  f"subjects left: {results['leaked_in_stream']} (counted in leaked).")
    if audit["examples"]:
        console.print(f"[red]problems[/red]: {audit['examples']}")


def write(results: dict[str, Any], out: Path) -> list[Path]:
    """results.json and soak.png (recall p50/p99, consumer lag and engram RSS over time) in `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    samples, rows = results["samples"], results["buckets"]
    fig, (latency, lag, rss) = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
    middles = [(r["start_s"] + r["end_s"]) / 2 for r in rows if r["recalls"]]
    latency.plot(middles, [r["p50_ms"] for r in rows if r["recalls"]], "o-", label="recall p50")
    latency.plot(middles, [r["p99_ms"] for r in rows if r["recalls"]], "^--", label="recall p99")
    latency.set_ylabel("ms")
    latency.set_title(f"recall latency per {results['options']['bucket_s']:g} s")
    known = [s for s in samples if s["lag"] is not None]
    lag.plot([s["t_s"] for s in known], [s["lag"] for s in known], "-", color="purple",
             label="consumer lag (num_pending + num_ack_pending)")
    lag.plot([s["t_s"] for s in samples], [s["behind"] for s in samples], "-", color="brown",
             label="turns published, not stored yet")
    lag.set_ylabel("turns")
    lag.set_title("backlog: ingestor consumer lag, and turns not yet in any entry")
    alive = [s for s in samples if s["rss_mb"] is not None]
    rss.plot([s["t_s"] for s in alive], [s["rss_mb"] for s in alive], ".", markersize=3, color="green",
             label="engram RSS")
    heap = [s for s in alive if s.get("anon_mb") is not None]
    rss.plot([s["t_s"] for s in heap], [s["anon_mb"] for s in heap], ".", markersize=3, color="purple",
             label="of which heap (RssAnon)")
    rss.set_ylabel("MB")
    counted = [s for s in samples if s.get("entries") is not None]
    if counted:  # the store's size beside it: growth with the store, or with time
        store = rss.twinx()
        store.plot([s["t_s"] for s in counted], [s["entries"] for s in counted], "-", color="grey", linewidth=0.8,
                   label="entries stored (right)")
        store.set_ylabel("entries")
        store.legend(loc="lower right", fontsize=8)
    rss.set_xlabel("seconds since the load started")
    rss.set_title("engram resident memory (VmRSS)")
    marks = {"engram_kill": ("red", "engram SIGKILL"), "nats_restart": ("orange", "NATS restart")}
    for event in results["chaos"]["events"]:
        color, label = marks[event["action"]]
        for ax in (latency, lag, rss):
            ax.axvline(event["t_s"], color=color, linestyle=":", label=label)
    for ax in (latency, lag, rss):
        ax.axvline(results["throughput"]["load_s"], color="black", linewidth=0.8, label="load ends")
    for forget in results["forgets"]:
        for ax in (latency, lag, rss):
            ax.axvline(forget["t_s"], color="grey", linestyle="--", linewidth=0.8, label="forget")
    for ax in (latency, lag, rss):
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out / "soak.png", dpi=110)
    plt.close(fig)
    return [out / "results.json", out / "soak.png"]
