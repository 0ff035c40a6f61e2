"""Answering the retriever's requests in the tenant's turn (fairness.py): what its handlers call, body in, reply out.

The turn is taken before the body is parsed, so a refusal costs next to nothing.
"""
from pydantic import ValidationError

from engram_client.contract import EntriesRequest, EntriesResponse, RecallRequest, RecallResponse
from shared.messaging import replies
from shared.retrieval.answer import answer_recall
from shared.retrieval.entries import entries
from shared.retrieval.fairness import FairQueue
from shared.retrieval.recall import Retrieval
from shared.retrieval.summary import Summarizer
from shared.runtime import metrics
from shared.working_memory import WorkingMemory


async def recall_in_turn(queue: FairQueue, retrieval: Retrieval, working_memory: WorkingMemory,
                         summarizer: Summarizer, tenant: str, body: bytes) -> RecallResponse:
    """Answer a RecallRequest body once the tenant's turn comes (see answer_recall)."""
    async with queue.turn(tenant):
        try:
            request = replies.parse(RecallRequest, body)  # so bad JSON is reported as such
        except ValidationError:
            metrics.recall_requests_total.labels("unknown", "invalid_request").inc()
            raise
        return await answer_recall(retrieval, working_memory, tenant, request, summarizer)


async def entries_in_turn(queue: FairQueue, retrieval: Retrieval, tenant: str, body: bytes) -> EntriesResponse:
    """Answer an EntriesRequest body once the tenant's turn comes (see entries)."""
    async with queue.turn(tenant):
        return await entries(retrieval.store, tenant, replies.parse(EntriesRequest, body),
                             retrieval.max_reply_bytes)
