"""The Grafana dashboard for engram, built from code: `python -m services.dashboard [PATH]` writes it.

The committed copy is deploy/grafana/dashboards/engram.json (a test checks it equals this module's output), so edit
the panels here and run the module again. Panels read the recording rules of deploy/prometheus/rules where one
exists; every `engram_*` name used must be declared in shared/runtime/metrics.py (also checked by a test).
"""
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Json = dict[str, Any]
PanelKind = Literal["timeseries", "stat"]

DEFAULT_PATH = Path("deploy/grafana/dashboards/engram.json")
DATASOURCE: Json = {"type": "prometheus", "uid": "${datasource}"}
GRID_WIDTH = 24
RATE = "$__rate_interval"


@dataclass(frozen=True)
class Target:
    """One PromQL query of a panel and how its series are named in the legend."""

    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    """A timeseries or stat panel; width and height are in Grafana grid units (24 across)."""

    title: str
    targets: tuple[Target, ...]
    description: str
    unit: str = "short"
    kind: PanelKind = "timeseries"
    width: int = 8
    height: int = 8


@dataclass(frozen=True)
class Row:
    """A titled row of panels."""

    title: str
    panels: tuple[Panel, ...]


def timeseries(title: str, description: str, *targets: Target, unit: str = "short", width: int = 8) -> Panel:
    """A graph over time."""
    return Panel(title, targets, description, unit=unit, width=width)


def stat(title: str, description: str, *targets: Target, unit: str = "short", width: int = 4) -> Panel:
    """A single current value."""
    return Panel(title, targets, description, unit=unit, kind="stat", width=width, height=4)


def quantile(q: float, metric: str, by: str = "") -> str:
    """PromQL for the q-quantile of a histogram over the panel's rate interval, grouped by `by` (comma-separated)."""
    labels = f"{by}, le" if by else "le"
    return f"histogram_quantile({q}, sum by ({labels}) (rate({metric}_bucket[{RATE}])))"


def per_second(metric: str, by: str = "", selector: str = "") -> str:
    """PromQL for a counter's per-second rate over the panel's rate interval, summed by `by`."""
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} (rate({metric}{selector}[{RATE}]))"


def per_hour(metric: str, by: str = "") -> str:
    """PromQL for how much a counter grew over the last hour, summed by `by`."""
    grouping = f" by ({by})" if by else ""
    return f"sum{grouping} (increase({metric}[1h]))"


def overview() -> Row:
    """Is everything up, and the few numbers to look at first."""
    return Row("Overview", (
        stat("Ready processes", "Processes whose /readyz answers ready, of the engram targets Prometheus scrapes.",
             Target('sum(engram_ready{job="engram"})', "ready"), Target('count(up{job="engram"})', "targets")),
        stat("Version", "Which engram each process runs (engram_build_info).",
             Target("count by (version) (engram_build_info)", "{{version}}")),
        stat("Turns / s", "Turns accepted by the ingestors over 5 minutes.",
             Target('sum(engram:turns_per_second:5m{outcome="accepted"})'), unit="ops"),
        stat("Fast recall p99", "99th percentile of fast recall over 5 minutes; the objective is 1 s.",
             Target('engram:recall_seconds_p99:5m{mode="fast"}'), unit="s"),
        stat("Ingest backlog", "Turns and flushes not yet delivered to the ingestor consumer.",
             Target('sum(engram:consumer_pending_max:1m{consumer="ingestor"})')),
        stat("Dead letters (1 h)", "Messages moved to the dead-letter subjects in the last hour.",
             Target(per_hour("engram_dead_lettered_total"))),
    ))


def ingest() -> Row:
    """Turns in, windows out, and what slows or stops them."""
    return Row("Ingest", (
        timeseries("Turns / s", "Turns the ingestors received, by outcome (accepted or duplicate).",
                   Target("engram:turns_per_second:5m", "{{outcome}}"), unit="ops"),
        timeseries("Windows and entries / s", "Windows sealed (by reason), windows written and entries stored.",
                   Target(per_second("engram_windows_sealed_total", "reason"), "sealed: {{reason}}"),
                   Target("engram:windows_written_per_second:5m", "written"),
                   Target("engram:entries_written_per_second:5m", "entries"),
                   Target(per_second("engram_flushes_total"), "flushes"), unit="ops"),
        timeseries("Window end to end", "From a window's last turn reaching the ingestor to its entries stored.",
                   Target(quantile(0.5, "engram_window_end_to_end_seconds"), "p50"),
                   Target("engram:window_end_to_end_seconds_p99:5m", "p99"), unit="s"),
        timeseries("Write stages p99", "Compress, embed and upsert of a batch of windows, and the whole write.",
                   Target("engram:ingest_stage_seconds_p99:5m", "{{stage}}"),
                   Target(quantile(0.99, "engram_window_write_seconds"), "whole write"),
                   Target(quantile(0.99, "engram_embed_seconds", "kind"), "embed {{kind}}"), unit="s"),
        timeseries("Consumer backlog", "The ingestor consumer as JetStream reports it: not yet delivered, "
                   "delivered and not acknowledged, redelivered.",
                   Target("engram:consumer_pending_max:1m", "pending {{consumer}}"),
                   Target("max by (consumer) (engram_consumer_ack_pending)", "ack pending {{consumer}}"),
                   Target("max by (consumer) (engram_consumer_redelivered)", "redelivered {{consumer}}")),
        timeseries("Trouble / s", "Dead letters, retries, failed window writes, messages left unsettled, "
                   "compare-and-set conflicts and turns whose text expired before their window was written.",
                   Target("engram:dead_letters_per_second:5m", "dead letter {{service}} {{code}}"),
                   Target(per_second("engram_retried_total", "service, code"), "retry {{service}} {{code}}"),
                   Target(per_second("engram_window_failures_total", "code"), "window failure {{code}}"),
                   Target(per_second("engram_unsettled_total", "service"), "unsettled {{service}}"),
                   Target(per_second("engram_kv_conflicts_total"), "KV conflicts"),
                   Target(per_second("engram_turns_missing_total"), "turns missing"), unit="ops"),
        timeseries("Open conversations", "Conversations with turns waiting in a window, per ingestor replica.",
                   Target("engram_open_conversations", "{{instance}}")),
    ))


def recall() -> Row:
    """How fast recall answers, how often it fails, and what it returns."""
    return Row("Recall", (
        timeseries("Recall latency", "p50 and p99 by mode over 5 minutes; fast recall's objective is 1 s at p99.",
                   Target("engram:recall_seconds_p50:5m", "p50 {{mode}}"),
                   Target("engram:recall_seconds_p99:5m", "p99 {{mode}}"), unit="s"),
        timeseries("Recall requests / s", "By mode and outcome (ok, or the reply's error code).",
                   Target("engram:recall_requests_per_second:5m", "{{mode}} {{outcome}}"), unit="reqps"),
        timeseries("Recall stages p99", "Working memory, embed, search, plan (deep recall only) and render (the "
                   "rest: ranking and rendering).",
                   Target(quantile(0.99, "engram_recall_stage_seconds", "stage"), "{{stage}}"), unit="s"),
        timeseries("Recall errors", "Share of recall requests answered with an error, by mode.",
                   Target("engram:recall_error_ratio:5m", "{{mode}}"), unit="percentunit"),
        timeseries("Entries and tokens returned", "Median entries one recall returned and median tokens of the "
                   "context it rendered, by mode.",
                   Target(quantile(0.5, "engram_recall_entries_returned", "mode"), "entries {{mode}}"),
                   Target(quantile(0.5, "engram_recall_context_tokens", "mode"), "tokens {{mode}}")),
        timeseries("Deep recall", "Median search rounds of a deep recall, and deep recalls cut short by their "
                   "deadline per second.",
                   Target(quantile(0.5, "engram_recall_deep_rounds"), "rounds p50"),
                   Target(per_second("engram_recall_deep_deadline_total"), "deadline / s")),
        timeseries("Request-reply / s", "Every request-reply message handled, by service, subject and outcome; "
                   "and the requests refused at once because their tenant held its share of a retriever's workers "
                   "(ENGRAM_RECALL_TENANT_SHARE).",
                   Target(per_second("engram_requests_total", "service, subject, outcome"),
                          "{{service}} {{subject}} {{outcome}}"),
                   Target(per_second("engram_tenant_limited_total", "kind"), "{{kind}} over a tenant's share"),
                   unit="reqps"),
    ))


def consolidation() -> Row:
    """Whether consolidation runs, how long it takes, and what it changes."""
    return Row("Consolidation", (
        stat("Since last success", "Time since any consolidator last finished a run without error; the alert "
             "fires past 3 h.",
             Target("time() - max(engram_consolidation_last_success_timestamp_seconds > 0)"), unit="s", width=6),
        timeseries("Runs per hour", "Consolidation runs by trigger (schedule or request) and outcome.",
                   Target(per_hour("engram_consolidation_runs_total", "trigger, outcome"), "{{trigger}} {{outcome}}"),
                   width=6),
        timeseries("Run duration", "p50 and p99 of one tenant's consolidation run.",
                   Target(quantile(0.5, "engram_consolidation_seconds"), "p50"),
                   Target(quantile(0.99, "engram_consolidation_seconds"), "p99"), unit="s", width=6),
        timeseries("Changes per hour", "Entries merged, facts superseded and entries removed by retention.",
                   Target(per_hour("engram_consolidation_merged_total"), "merged"),
                   Target(per_hour("engram_consolidation_superseded_total"), "superseded"),
                   Target(per_hour("engram_consolidation_forgotten_total", "reason"), "forgotten {{reason}}"),
                   width=6),
        timeseries("Leases per hour", "Tenant leases acquired, released and lost by the consolidators.",
                   Target(per_hour("engram_consolidation_lease_changes_total", "change"), "{{change}}"), width=12),
        timeseries("Forget per hour", "What forget requests deleted, by place.",
                   Target(per_hour("engram_forgotten_total", "place"), "{{place}}"), width=12),
    ))


def memory_quality() -> Row:
    """What is stored and whether recall uses it."""
    return Row("Memory quality", (
        timeseries("Entries by kind", "Stored entries by kind, as of the last scheduled consolidation pass.",
                   Target("engram:entries_by_kind:max", "{{kind}}")),
        timeseries("Never recalled", "Share of stored entries no recall has returned yet, and share of recalls "
                   "that found nothing.",
                   Target("max(engram_entries_never_recalled_ratio)", "entries never recalled"),
                   Target("engram:recall_empty_ratio:5m", "empty recalls {{mode}}"), unit="percentunit"),
        timeseries("Use and summaries / s", "Recall hits written to entries' use counts, and working-memory "
                   "summaries by source.",
                   Target(per_second("engram_recall_hits_recorded_total"), "recall hits recorded"),
                   Target(per_second("engram_working_memory_summaries_total", "source"), "summary {{source}}"),
                   unit="ops"),
    ))


def llm_cost() -> Row:
    """What the chat model costs, and how often engram had to do without it."""
    return Row("LLM cost", (
        stat("Tokens (24 h)", "Prompt and completion tokens of every chat-model call in the last 24 hours.",
             Target("sum(increase(engram_llm_tokens_total[24h]))"), width=4),
        stat("Breaker open", "1 while a process's circuit breaker refuses calls to the chat endpoint.",
             Target("max(engram_llm_breaker_open)"), width=4),
        timeseries("Tokens / s", "By purpose and kind (prompt or completion).",
                   Target("engram:llm_tokens_per_second:5m", "{{purpose}} {{kind}}"), width=16),
        timeseries("Calls / s", "Chat-model calls by purpose and outcome.",
                   Target("engram:llm_calls_per_second:5m", "{{purpose}} {{outcome}}"), unit="reqps"),
        timeseries("Fallbacks", "Share of calls whose work the offline path did (15 minutes; the alert fires "
                   "over 20%), and fallbacks per second by reason.",
                   Target("engram:llm_fallback_ratio:15m", "ratio {{purpose}}"),
                   Target(per_second("engram_llm_fallbacks_total", "purpose, reason"), "{{purpose}} {{reason}} / s"),
                   unit="percentunit"),
        timeseries("Call latency p99", "One chat-model call, repair round included, by purpose.",
                   Target(quantile(0.99, "engram_llm_seconds", "purpose"), "{{purpose}}"), unit="s"),
    ))


def tenancy() -> Row:
    """What engram refuses or paces per tenant, and whether its own state and streams are as they should be."""
    return Row("Tenancy and quotas", (
        stat("Tenant streams", "Tenants' turns streams the ingestors consume (each tenant gets its own on its first "
             "turn or flush).",
             Target("engram:tenant_streams:max")),
        stat("Streams made (24 h)", "Tenants' turns streams made on their first message in the last 24 hours: "
             "new tenants starting to publish.",
             Target("sum(increase(engram_tenant_streams_made_total[24h]))")),
        stat("Near storage quota", "Tenants whose turns stream holds at least 90% of its storage quota: once it is "
             "full their publishes are refused. The alert fires after 10 minutes.",
             Target('engram:tenants_near_quota:max{quota="turns_storage"}')),
        stat("Legacy turns stream", "1 while the pre-isolation stream of every tenant's turns (MEM_TURNS) still "
             "exists: de-duplication, storage quotas and ingestion are not per tenant until it is migrated "
             "(docs/operations/upgrades.md).",
             Target("engram:legacy_turns_stream:max")),
        stat("Refused replies (1 h)", "Requests left unanswered in the last hour because their reply subject was "
             "not an inbox: someone tried to make engram write its answer elsewhere (a bucket, the JetStream API, "
             "another tenant's subjects). Any one fires an alert.",
             Target(per_hour("engram_replies_refused_total"))),
        stat("Unreadable state (1 h)", "Values in engram's own NATS buckets (working memory, forget marks, "
             "consolidation leases and runs) that could not be parsed in the last hour; engram read them as absent. "
             "Any one fires an alert.",
             Target(per_hour("engram_state_unreadable_total"))),
        timeseries("Quota refusals / s", "Requests refused (`unavailable`, with a retry hint) because their tenant "
                   "was over its request rate, by quota: recall, or requests (entries, forget, consolidate). Short "
                   "bursts are the quota working; a sustained rate means a tenant's demand exceeds its quota.",
                   Target("engram:quota_refusals_per_second:5m", "{{quota}}"), unit="reqps"),
        timeseries("Ingest pacing", "Seconds tenants' turns waited in their own streams per second, because their "
                   "tenant was over its ingest rate (ENGRAM_TENANT_INGEST_PER_S or its own quota), summed over "
                   "tenants and ingestors: 1 means one tenant's turns waited all the time. Other tenants' turns are "
                   "not held up.",
                   Target(per_second("engram_ingest_paced_seconds_total"), "paced")),
        timeseries("Poison and budgets / s", "Windows whose offline text work ran past its time budget (stored as "
                   "plain lines), by work; messages and windows whose handling the process did not survive too often "
                   "(a message dead-lettered, a window stored plain or its turns dead-lettered).",
                   Target(per_second("engram_text_budget_exceeded_total", "work"), "over budget {{work}}"),
                   Target(per_second("engram_poison_total", "what"), "poison {{what}}"), unit="ops"),
        timeseries("Refused and unreadable / s", "Replies refused (reply subject not an inbox) by service, messages "
                   "of tenants the registry does not list, and unparsable values of engram's NATS state by place.",
                   Target(per_second("engram_replies_refused_total", "service"), "reply refused {{service}}"),
                   Target(per_second("engram_tenants_refused_total"), "unregistered tenant"),
                   Target(per_second("engram_state_unreadable_total", "place"), "unreadable {{place}}"),
                   unit="ops"),
    ))


def rows() -> list[Row]:
    """Every row of the dashboard, top to bottom."""
    return [overview(), ingest(), recall(), consolidation(), memory_quality(), llm_cost(), tenancy()]


def panel_json(panel: Panel, panel_id: int, x: int, y: int) -> Json:
    """One panel as Grafana JSON at grid position (x, y)."""
    options: Json
    if panel.kind == "stat":
        options = {"colorMode": "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
                   "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "textMode": "auto"}
    else:
        options = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                   "tooltip": {"mode": "multi", "sort": "desc"}}
    targets = [{"datasource": DATASOURCE, "expr": t.expr, "legendFormat": t.legend or "__auto", "range": True,
                "refId": chr(ord("A") + i)} for i, t in enumerate(panel.targets)]
    return {"datasource": DATASOURCE, "description": panel.description,
            "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
            "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y}, "id": panel_id, "options": options,
            "targets": targets, "title": panel.title, "type": panel.kind}


def layout(all_rows: Iterable[Row]) -> list[Json]:
    """Rows and their panels as Grafana JSON, panels filling each row left to right, ids counted from 1."""
    out: list[Json] = []
    y = 0
    for row in all_rows:
        out.append({"collapsed": False, "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y}, "id": len(out) + 1,
                    "panels": [], "title": row.title, "type": "row"})
        y += 1
        x, line_height = 0, 0
        for panel in row.panels:
            if x + panel.width > GRID_WIDTH:
                x, y, line_height = 0, y + line_height, 0
            out.append(panel_json(panel, len(out) + 1, x, y))
            x, line_height = x + panel.width, max(line_height, panel.height)
        y += line_height
    return out


def datasource_variable() -> Json:
    """The `${datasource}` template variable: any Prometheus data source, the provisioned one by default."""
    return {"current": {"selected": False, "text": "Prometheus", "value": "prometheus"}, "hide": 0,
            "includeAll": False, "label": "Data source", "multi": False, "name": "datasource", "options": [],
            "query": "prometheus", "refresh": 1, "regex": "", "type": "datasource"}


def dashboard() -> Json:
    """The whole dashboard as Grafana JSON."""
    return {"annotations": {"list": []}, "editable": True, "graphTooltip": 1, "id": None, "links": [],
            "panels": layout(rows()), "refresh": "30s", "schemaVersion": 39, "tags": ["engram"],
            "templating": {"list": [datasource_variable()]}, "time": {"from": "now-6h", "to": "now"},
            "timepicker": {}, "timezone": "", "title": "engram", "uid": "engram", "version": 1}


def render() -> str:
    """The dashboard as the text committed in deploy/grafana/dashboards/engram.json."""
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def expressions(board: Json) -> list[str]:
    """Every PromQL expression of a dashboard's panels."""
    return [t["expr"] for panel in board["panels"] for t in panel.get("targets", [])]


def main(argv: Sequence[str]) -> int:
    """Write the dashboard to argv[0] (default deploy/grafana/dashboards/engram.json)."""
    path = Path(argv[0]) if argv else DEFAULT_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
