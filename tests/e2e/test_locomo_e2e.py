"""LoCoMo conversation 26 end to end: published through NATS as a chat product would, recalled by request-reply."""
import statistics
import time
from pathlib import Path

from engram_client import MemoryClient, publish_sessions, wait_until_stored
from services.stack import Running
from shared.evaluation import locomo
from shared.evaluation.latency import percentiles
from shared.evaluation.plain import ConversationScore
from tests.support.ids import unique


async def test_locomo_26_through_nats_matches_the_plain_function_path(
        stack: Running, locomo_dir: Path, locomo_plain_scores: dict[str, ConversationScore]) -> None:
    """LoCoMo conversation 26 published and recalled through NATS scores evidence recall@10 within 0.02 of the
    plain-function path, and at least 0.78."""
    conversation = locomo.load(locomo_dir / "26.json")
    tenant = unique("locomo-e2e")
    started = time.perf_counter()
    async with await MemoryClient.connect(stack.nats_url, tenant, timeout_s=30) as client:
        await publish_sessions(client, conversation.sessions)  # one conversation_id per session, flushed
        await wait_until_stored(client, conversation.turns, timeout_s=300)
        ingest_s = time.perf_counter() - started
        rows, latencies = [], []
        for question in conversation.scored():
            asked = time.perf_counter()
            reply = await client.recall(question.question, user_id=conversation.user_id, k=10)
            latencies.append((time.perf_counter() - asked) * 1e3)
            rows.append(locomo.score(question.evidence, [e.source_turn_ids for e in reply.entries]))
    e2e_all = statistics.fmean(r[0] for r in rows)

    plain = locomo_plain_scores["26"]  # the same conversation through the plain functions, in this session

    latency = percentiles(latencies)
    print(f"e2e all@10={e2e_all:.3f} plain all@10={plain.overall.all_at_k:.3f} "
          f"ingest {len(conversation.turns) / ingest_s:.1f} turns/s, recall p50 {latency.p50:.1f} ms "
          f"p95 {latency.p95:.1f} ms")
    assert abs(e2e_all - plain.overall.all_at_k) <= 0.02
    assert e2e_all >= 0.78
