"""Every Prometheus metric engram exports, in one place; labels are bounded (never a tenant id)."""
from collections.abc import Sequence

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# outcome: accepted, duplicate, forgotten (fetched before a forget of its user or conversation)
turns_total = Counter("engram_turns_total", "Turns received by the ingestor", ["outcome"])
flushes_total = Counter("engram_flushes_total", "Flush messages applied")
windows_sealed_total = Counter("engram_windows_sealed_total", "Windows closed", ["reason"])  # size|idle|flush
windows_written_total = Counter("engram_windows_written_total", "Sealed windows written as entries")
window_failures_total = Counter("engram_window_failures_total", "Failed attempts to write a sealed window", ["code"])
entries_written_total = Counter("engram_entries_written_total", "Entries upserted into the store")
open_conversations = Gauge("engram_open_conversations", "Conversations with turns waiting in a window (the open "
                           "index, as this replica follows it)")
kv_conflicts_total = Counter("engram_kv_conflicts_total", "Working-memory writes retried after another replica "
                             "wrote first (compare-and-set)")
write_seconds = Histogram("engram_window_write_seconds", "Compress + embed + upsert of a batch of windows",
                          buckets=LATENCY_BUCKETS)
ingest_stage_seconds = Histogram("engram_ingest_stage_seconds", "One stage of writing a batch of windows",
                                 ["stage"], buckets=LATENCY_BUCKETS)  # stage: compress|embed|upsert
window_end_to_end_seconds = Histogram("engram_window_end_to_end_seconds", "From a window being sealed (its last "
                                      "turn, its idle timeout or a flush) to its entries being stored",
                                      buckets=(*LATENCY_BUCKETS, 30.0, 60.0, 300.0, 900.0))
consumer_pending = Gauge("engram_consumer_pending", "Messages of the stream not yet delivered to the consumer "
                         "(read from JetStream)", ["consumer"])
consumer_ack_pending = Gauge("engram_consumer_ack_pending", "Messages delivered and not yet acknowledged (read "
                             "from JetStream)", ["consumer"])
consumer_redelivered = Gauge("engram_consumer_redelivered", "Messages delivered more than once and not yet "
                             "acknowledged (read from JetStream)", ["consumer"])
recall_seconds = Histogram("engram_recall_seconds", "Recall handling time", ["mode"], buckets=LATENCY_BUCKETS)
recall_requests_total = Counter("engram_recall_requests_total", "Recall requests by mode and outcome",
                                ["mode", "outcome"])  # mode: fast|deep|unknown (unreadable); outcome: ok|error code
recall_stage_seconds = Histogram("engram_recall_stage_seconds", "One stage of answering a recall", ["stage"],
                                 buckets=LATENCY_BUCKETS)  # stage: working_memory|embed|search|plan (deep)|render
recall_entries_returned = Histogram("engram_recall_entries_returned", "Entries one recall returned", ["mode"],
                                    buckets=(0, 1, 2, 3, 5, 10, 20, 50, 100))
recall_empty_total = Counter("engram_recall_empty_total", "Recalls that found no entry", ["mode"])
recall_context_tokens = Histogram("engram_recall_context_tokens", "Tokens of the context one recall rendered",
                                  ["mode"], buckets=(0, 50, 100, 250, 500, 1000, 2000, 4000, 8000, 16000))
requests_total = Counter("engram_requests_total", "Request-reply messages handled", ["service", "subject",
                                                                                      "outcome"])
tenant_limited_total = Counter("engram_tenant_limited_total", "Requests refused (`unavailable`) because "
                               "their tenant's queue for a retriever's workers was full or they waited too long",
                               ["kind"])  # kind: recall|entries (never the tenant: unbounded)
# Tenancy: what engram refuses or paces per tenant (labels name the quota or place, never the tenant)
replies_refused_total = Counter("engram_replies_refused_total", "Requests left unanswered because their reply "
                                "subject is not an inbox (an attempt to make engram write elsewhere)", ["service"])
quota_refusals_total = Counter("engram_quota_refusals_total", "Requests refused (`unavailable`, with a retry hint) "
                               "because their tenant is over its rate", ["quota"])  # quota: recall|requests
ingest_paced_seconds_total = Counter("engram_ingest_paced_seconds_total", "Time tenants' turns waited in their own "
                                     "stream because their tenant was over its ingest rate")
tenants_near_quota = Gauge("engram_tenants_near_quota", "Tenants whose turns stream holds at least 90% of its "
                           "storage quota (publishes are refused once it is full)", ["quota"])  # turns_storage
tenant_streams = Gauge("engram_tenant_streams", "Tenants' turns streams this ingestor consumes")
tenant_streams_made_total = Counter("engram_tenant_streams_made_total", "Tenants' turns streams made on their "
                                    "first message")
tenants_refused_total = Counter("engram_tenants_refused_total", "Messages of a tenant the registry does not list")
state_unreadable_total = Counter("engram_state_unreadable_total", "Values engram read back from its own NATS "
                                 "state that it could not parse (skipped or repaired, never blamed on a client)",
                                 ["place"])  # open_index|forget_marks|leases|runs|buffers|turns|summaries|attempts
legacy_turns_stream = Gauge("engram_legacy_turns_stream", "1 while the legacy stream of every tenant's turns "
                            "(MEM_TURNS) exists: de-duplication, quotas and ingestion are not per tenant until it is "
                            "migrated (docs/operations/upgrades.md)")
text_budget_exceeded_total = Counter("engram_text_budget_exceeded_total", "Windows whose offline text work ran past "
                                     "its time budget (stored as plain lines)", ["work"])  # work: compress|facts
poison_total = Counter("engram_poison_total", "Messages and windows whose handling was interrupted (the process "
                       "died or hung) too often: a message dead-lettered, a window stored plain or dead-lettered",
                       ["what"])  # what: message|window_plain|window_dead_lettered
dead_lettered_total = Counter("engram_dead_lettered_total", "Messages moved to the dead-letter subject",
                              ["service", "code"])
retried_total = Counter("engram_retried_total", "Messages negatively acknowledged for a later retry", ["service",
                                                                                                        "code"])
turns_missing_total = Counter("engram_turns_missing_total", "Turns of a sealed window whose text had expired from "
                              "working memory before the window was written")
unsettled_total = Counter("engram_unsettled_total", "Messages that could not be acked, nak'ed or dead-lettered "
                          "(JetStream redelivers them)", ["service"])
embed_seconds = Histogram("engram_embed_seconds", "Dense embedding of one request's texts", ["kind"],
                          buckets=LATENCY_BUCKETS)  # kind: query|passage
forgotten_total = Counter("engram_forgotten_total", "What Forget requests deleted, by place",
                          ["place"])  # entries|working_memory|turns|queued_turns|dead_letters

consolidation_runs_total = Counter("engram_consolidation_runs_total", "Consolidation runs of one tenant",
                                   ["trigger", "outcome"])  # trigger: schedule|request; outcome: ok|error
consolidation_seconds = Histogram("engram_consolidation_seconds", "Duration of one tenant's consolidation run",
                                  buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0))
consolidation_last_success = Gauge("engram_consolidation_last_success_timestamp_seconds",
                                   "When this replica last finished a consolidation run without error")
consolidation_merged_total = Counter("engram_consolidation_merged_total", "Entries merged into a near-duplicate")
consolidation_superseded_total = Counter("engram_consolidation_superseded_total",
                                         "Facts superseded by a newer statement of the same slot")
consolidation_forgotten_total = Counter("engram_consolidation_forgotten_total", "Entries removed by retention",
                                        ["reason"])  # low_retention|ttl|cap
lease_changes_total = Counter("engram_consolidation_lease_changes_total", "Tenant leases taken, given back, lost "
                              "or taken over from a holder whose process is gone", ["change"])
# acquired|released|lost|taken_over
entries_by_kind = Gauge("engram_entries", "Stored entries by kind, as of the last scheduled pass", ["kind"])
never_recalled_ratio = Gauge("engram_entries_never_recalled_ratio", "Share of stored entries no recall has "
                             "returned yet, as of the last scheduled pass")
recall_hits_recorded_total = Counter("engram_recall_hits_recorded_total",
                                     "Recall hits written to entries' use counts (in batches)")

llm_calls_total = Counter("engram_llm_calls_total", "Chat-model calls by purpose and outcome", ["purpose", "outcome"])
# outcome: ok|repaired|invalid|timeout|rate_limited|error|over_budget|breaker_open
llm_tokens_total = Counter("engram_llm_tokens_total", "Tokens the chat model read and wrote", ["purpose", "kind"])
# kind: prompt|completion
llm_seconds = Histogram("engram_llm_seconds", "One chat-model call, repair round included", ["purpose"],
                        buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0))
llm_fallbacks_total = Counter("engram_llm_fallbacks_total", "Work done by the offline path because the model could "
                              "not", ["purpose", "reason"])  # reason: the call's failed outcome
llm_breaker_open = Gauge("engram_llm_breaker_open", "1 while the circuit breaker refuses calls to the chat endpoint")
deep_rounds = Histogram("engram_recall_deep_rounds", "Search rounds of one deep recall (the plan's included)",
                        buckets=(1, 2, 3, 4, 5, 6))
deep_deadline_total = Counter("engram_recall_deep_deadline_total", "Deep recalls that answered with what they had "
                              "when their deadline came")
summaries_total = Counter("engram_working_memory_summaries_total", "Summaries of older working-memory turns",
                          ["source"])  # cached|model|extractive

ready = Gauge("engram_ready", "1 while this process's /readyz answers ready, else 0")
build_info = Gauge("engram_build_info", "Always 1; the labels say which engram this is", ["version"])


# The label values each labelled metric can take. Creating their children at start-up gives every series a 0 from
# the first scrape: a rate or an alert over a series that does not exist yet never fires, and a panel shows
# "no data". Kept literal here (metrics imports nothing of engram's); tests/unit/test_metrics_labels.py holds them
# to the Literals they mirror (error codes, LLM purposes).
ERROR_CODES = ("invalid_request", "forbidden", "not_found", "unavailable", "timeout", "internal")
MODES = ("fast", "deep")
STATE_PLACES = ("open_index", "forget_marks", "leases", "runs", "buffers", "turns", "summaries", "attempts")
LLM_PURPOSES = ("compress", "facts", "summary", "plan", "reflect", "consolidate")
LLM_FAILURES = ("invalid", "timeout", "rate_limited", "error", "over_budget", "breaker_open", "deadline")
KNOWN_LABELS: list[tuple[Counter | Gauge | Histogram, Sequence[tuple[str, ...]]]] = [
    (turns_total, [("accepted",), ("duplicate",), ("forgotten",)]),
    (windows_sealed_total, [("size",), ("idle",), ("flush",)]),
    (window_failures_total, [(code,) for code in ERROR_CODES]),
    (ingest_stage_seconds, [("compress",), ("embed",), ("upsert",)]),
    (consumer_pending, [("ingestor",)]),
    (consumer_ack_pending, [("ingestor",)]),
    (consumer_redelivered, [("ingestor",)]),
    (recall_seconds, [(mode,) for mode in MODES]),
    (recall_requests_total, [(mode, outcome) for mode in MODES for outcome in ("ok", *ERROR_CODES)]
     + [("unknown", "invalid_request")]),
    (recall_stage_seconds, [("working_memory",), ("embed",), ("search",), ("plan",), ("render",)]),
    (recall_entries_returned, [(mode,) for mode in MODES]),
    (recall_empty_total, [(mode,) for mode in MODES]),
    (recall_context_tokens, [(mode,) for mode in MODES]),
    (requests_total, [(service, subject, outcome) for service, subject in (
        ("retriever", "recall"), ("retriever", "entries"), ("consolidator", "consolidate"),
        ("consolidator", "forget"), ("consolidator", "export"), ("consolidator", "import"))
        for outcome in ("ok", *ERROR_CODES)]),
    (tenant_limited_total, [("recall",), ("entries",)]),
    (replies_refused_total, [("retriever",), ("consolidator",), ("provision",)]),
    (quota_refusals_total, [("recall",), ("requests",)]),
    (tenants_near_quota, [("turns_storage",)]),
    (state_unreadable_total, [(place,) for place in STATE_PLACES]),
    (text_budget_exceeded_total, [("compress",), ("facts",)]),
    (poison_total, [("message",), ("window_plain",), ("window_dead_lettered",)]),
    (dead_lettered_total, [(service, code) for service in ("ingestor", "closer") for code in ERROR_CODES]),
    (retried_total, [(service, code) for service in ("ingestor", "closer") for code in ERROR_CODES]),
    (unsettled_total, [("ingestor",), ("closer",)]),
    (embed_seconds, [("query",), ("passage",)]),
    (forgotten_total, [(place,) for place in ("entries", "working_memory", "turns", "queued_turns",
                                               "dead_letters")]),
    (consolidation_runs_total, [(trigger, outcome) for trigger in ("schedule", "request")
                                for outcome in ("ok", "error")]),
    (consolidation_forgotten_total, [("low_retention",), ("ttl",), ("cap",)]),
    (lease_changes_total, [("acquired",), ("released",), ("lost",), ("taken_over",)]),
    (entries_by_kind, [("episodic",), ("fact",), ("profile",)]),
    (llm_calls_total, [(purpose, outcome) for purpose in LLM_PURPOSES
                       for outcome in ("ok", "repaired", *LLM_FAILURES)]),
    (llm_tokens_total, [(purpose, kind) for purpose in LLM_PURPOSES for kind in ("prompt", "completion")]),
    (llm_seconds, [(purpose,) for purpose in LLM_PURPOSES]),
    (llm_fallbacks_total, [(purpose, reason) for purpose in LLM_PURPOSES for reason in LLM_FAILURES]),
    (summaries_total, [("cached",), ("model",), ("extractive",)]),
]


def initialise_series() -> None:
    """Create every labelled metric's child for each known label value (at 0), so each series exists from start-up.

    Every process does this for every metric, whatever services it runs: a dashboard or alert then reads 0, not
    "no data", from any of them. A gauge so created reads 0 until its owner sets it (the recording rules take the
    max across replicas, which the owner's value wins).
    """
    for metric, values in KNOWN_LABELS:
        for labels in values:
            metric.labels(*labels)


def llm_tokens_by_purpose() -> dict[str, int]:
    """Tokens this process's chat-model calls used so far, prompt and completion together, by purpose."""
    out: dict[str, int] = {}
    for metric in llm_tokens_total.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total"):
                purpose = sample.labels["purpose"]
                out[purpose] = out.get(purpose, 0) + int(sample.value)
    return out
