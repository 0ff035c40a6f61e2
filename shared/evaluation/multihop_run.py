"""`engram eval multihop`: publish every story of a half through NATS, ask its questions within a token budget, and
score all-evidence turn recall by question type and language, and ordering questions' chronological order."""
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence

from pydantic import BaseModel, Field

from engram_client import MemoryClient, publish_sessions, wait_until_stored
from engram_client.contract import RecallRequest
from shared.evaluation.machine import describe
from shared.evaluation.multihop import Figures, Hit, Judged, Story, figures, judge


class MultihopReport(BaseModel):
    """Everything one run of the multi-session stories measured."""

    machine: dict[str, object] = Field(default_factory=describe)
    split: str = ""
    k: int = 10
    token_budget: int | None = 2000
    mode: str = "fast"
    ingest_s: float = 0.0
    overall: Figures = Field(default_factory=Figures)
    by_type: dict[str, Figures] = Field(default_factory=dict)            # multi_hop, ordering, single_hop
    by_language_type: dict[str, Figures] = Field(default_factory=dict)   # "<language>/<type>"
    judged: list[Judged] = Field(default_factory=list)


def summarise(report: MultihopReport) -> MultihopReport:
    """The report with its figures computed from its judged questions."""
    def group(key: Callable[[Judged], str]) -> dict[str, Figures]:
        return {name: figures([j for j in report.judged if key(j) == name])
                for name in sorted({key(j) for j in report.judged})}

    return report.model_copy(update={"overall": figures(report.judged), "by_type": group(lambda j: j.type),
                                     "by_language_type": group(lambda j: f"{j.language}/{j.type}")})


async def run(client_for: Callable[[str], Awaitable[MemoryClient]], stories: Sequence[Story], split: str, *,
              k: int = 10, token_budget: int | None = 2000, mode: str = "fast",
              progress: Callable[[str], None] = lambda _: None) -> MultihopReport:
    """Publish every story into one fresh tenant (a user each), ask every question scoped to its user, and score."""
    run_id = uuid.uuid4().hex[:8]
    prefix = f"{run_id}-"
    report = MultihopReport(split=split, k=k, token_budget=token_budget, mode=mode)
    async with await client_for(f"multihop-{split}-{run_id}") as client:
        started = time.perf_counter()
        sessions = [s for story in stories for s in story.turns(run_id)]
        progress(f"publishing {sum(len(s) for s in sessions)} turns of {len(stories)} stories")
        await publish_sessions(client, sessions)
        await wait_until_stored(client, [t for s in sessions for t in s], timeout_s=3600)
        report.ingest_s = time.perf_counter() - started
        progress(f"asking {sum(len(s.questions) for s in stories)} questions")
        for story in stories:
            for question in story.questions:
                reply = await client.recall(RecallRequest(query=question.question, user_id=story.user_id(run_id),
                                                          k=k, token_budget=token_budget, mode=mode))
                hits = [Hit(conversation_id=e.conversation_id.removeprefix(prefix), turn_ids=e.source_turn_ids,
                            occurred_at=e.occurred_at) for e in reply.entries]
                report.judged.append(judge(story, question, hits, reply.context_tokens))
    return summarise(report)
