"""Two ingestors and two retrievers, each with its own NATS connection, share the load on one NATS server."""
from collections import Counter

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from engram_client import MemoryClient, wait_until_stored
from services.stack import running
from shared.settings import Settings
from shared.store import Scope
from tests.support.ids import unique
from tests.support.memory import stored_turn_ids
from tests.support.turns import conversation


async def test_replicas_share_the_work_and_each_turn_is_stored_once(e2e_settings: Settings, nats_url: str,
                                                                    spans: InMemorySpanExporter) -> None:
    """Two ingestors and two retrievers, each on its own connection, all take a share of the turns and recalls, and
    every turn is stored exactly once."""
    tenant = unique("t")
    settings = e2e_settings.model_copy(update={"fetch_batch": 4})  # small batches spread work across replicas
    turns = [t for c in range(12) for t in conversation(
        [("Ana" if i % 2 else "Bo", f"Conversation {c}, line {i}: we talked about topic {c * 10 + i}.")
         for i in range(9)], conversation_id=f"conv-{c}")]
    async with running(settings, ingestors=2, retrievers=2, nats_url=nats_url) as state:
        connections = [d.nc for d in state.ingestor_deps] + [d.broker.connection for d in state.retriever_deps]
        assert len({id(nc) for nc in connections}) == 4  # each instance has its own connection
        async with await MemoryClient.connect(state.nats_url, tenant) as client:
            await client.publish_turns(turns)
            for c in range(12):
                await client.flush(f"conv-{c}")
            await wait_until_stored(client, turns, timeout_s=60)
            retrievers = [d.broker.connection for d in state.retriever_deps]
            replied = [nc.stats["out_msgs"] for nc in retrievers]
            for i in range(40):
                reply = await client.recall(f"topic {i}", k=3)
                assert reply.entries
            served = [nc.stats["out_msgs"] - before for nc, before in zip(retrievers, replied, strict=True)]
        # Each message of the turns stream is handled in a consumer span that names the replica's connection (one
        # that failed, to be delivered again, ends in error).
        handled = Counter(str((s.attributes or {}).get("messaging.client.id")) for s in spans.get_finished_spans()
                          if s.kind is SpanKind.CONSUMER and s.name in ("engram.turns accept", "engram.flush accept")
                          and s.status.status_code is not StatusCode.ERROR)
        ids = await stored_turn_ids(state.store, tenant)
        entries = await state.store.count(Scope(tenant_id=tenant))
    counts = Counter(ids)
    assert set(counts) == {t.turn_id for t in turns}, "a turn was lost"
    assert max(counts.values()) == 1, f"turns stored twice: {[k for k, v in counts.items() if v > 1]}"
    assert entries == 12 * 3  # 9 turns per conversation in windows of 4: 4 + 4 + 1 (flushed)
    assert sorted(handled) == ["engram-ingestor-0", "engram-ingestor-1"], handled  # both replicas took turns
    assert sum(handled.values()) == len(turns) + 12, handled  # and each message was handled once
    assert sum(served) == 40 and all(s > 0 for s in served), served  # one reply per recall, from both retrievers
