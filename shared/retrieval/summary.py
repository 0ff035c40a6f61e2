"""Summary + recent turns: when a conversation's recent turns outgrow the summary budget, the older ones are folded
into a running summary (the chat products' pattern), cached per conversation in working memory.

The fold happens once per half budget of new turns, not per recall: until then the cached summary is returned with
the turns after it. The recall that folds gets the extractive summary at once; with a model configured, the
model's summary of the same turns replaces it in the cache in the background, so no recall waits for the model.
"""
import asyncio
import logging

from engram_client.contract import Turn
from engram_client.errors import EngramError
from shared.compress.summary import extractive
from shared.errors import LlmInvalid, LlmUnavailable
from shared.llm import LlmClient, fell_back, prompts
from shared.llm.schemas import Summary
from shared.runtime import metrics
from shared.settings import Settings
from shared.text import language, tokens
from shared.working_memory import CachedSummary, WorkingMemory

log = logging.getLogger("engram.summary")


def _cost(turns: list[Turn], encoding: str) -> int:
    return sum(tokens.count(f"{t.speaker}: {t.text}", encoding) for t in turns)


class Summarizer:
    """Folds older recent turns into a conversation's running summary."""

    def __init__(self, working_memory: WorkingMemory, settings: Settings, llm: LlmClient | None = None) -> None:
        self._wm = working_memory
        self._settings = settings
        self._llm = llm
        self._pending: dict[tuple[str, str], asyncio.Task[None]] = {}

    def _split(self, after: list[Turn]) -> tuple[list[Turn], list[Turn]]:
        """(turns to fold, newest turns that fit half the budget and stay raw)."""
        keep: list[Turn] = []
        for turn in reversed(after):
            if keep and _cost([turn, *keep], self._settings.tokenizer) > self._settings.summary_token_budget // 2:
                break
            keep.insert(0, turn)
        return after[:len(after) - len(keep)], keep

    def uncached(self, turns: list[Turn]) -> tuple[list[Turn], str | None]:
        """The same fold over turns that are not the whole conversation (one user's): extractive, never stored."""
        if _cost(turns, self._settings.tokenizer) <= self._settings.summary_token_budget:
            return turns, None
        fold, keep = self._split(turns)
        if not fold:
            return turns, None
        return keep, extractive("", fold, self._settings.summary_max_words)

    async def apply(self, tenant: str, conversation_id: str, turns: list[Turn],
                    user_id: str | None = None) -> tuple[list[Turn], str | None]:
        """The turns to return raw and the summary of those before them (None while all fit the budget).

        Args:
            user_id: the request's user; a cached summary that holds anyone else's words is not theirs to see.
        """
        settings = self._settings
        cached = await self._wm.summary(tenant, conversation_id)
        if user_id is not None and cached is not None and set(cached.user_ids) - {user_id}:
            return self.uncached(turns)
        ids = [t.turn_id for t in turns]
        after = turns[ids.index(cached.through_turn_id) + 1:] if cached and cached.through_turn_id in ids else turns
        if _cost(after, settings.tokenizer) <= settings.summary_token_budget:
            if cached is not None:
                metrics.summaries_total.labels("cached").inc()
            return after, cached.text if cached else None
        fold, keep = self._split(after)
        if not fold:  # one turn alone outgrows the budget: nothing older to fold
            return after, cached.text if cached else None
        previous = cached.text if cached else ""
        users = sorted({*(cached.user_ids if cached else []), *(t.user_id for t in fold if t.user_id)})
        summary = CachedSummary(through_turn_id=fold[-1].turn_id, source="extractive", user_ids=users,
                                text=extractive(previous, fold, settings.summary_max_words))
        await self._wm.put_summary(tenant, conversation_id, summary)
        metrics.summaries_total.labels("extractive").inc()
        if self._llm is not None and (tenant, conversation_id) not in self._pending:
            task = asyncio.create_task(self._model(tenant, conversation_id, previous, fold, summary))
            self._pending[(tenant, conversation_id)] = task
            task.add_done_callback(lambda _: self._pending.pop((tenant, conversation_id), None))
        return keep, summary.text

    async def _model(self, tenant: str, conversation_id: str, previous: str, fold: list[Turn],
                     extractive_summary: CachedSummary) -> None:
        """Ask the model for the same fold; store its summary unless the conversation moved on meanwhile."""
        assert self._llm is not None
        lang = language.detect_iso(" ".join(t.text for t in fold), self._settings.bm25_language)
        document = prompts.document("summary", language=lang, previous_summary=previous,
                                    turns=[prompts.turn_json(t) for t in fold],
                                    max_words=self._settings.summary_max_words)
        try:
            answer = await self._llm.ask(tenant, "summary", document, Summary)
            current = await self._wm.summary(tenant, conversation_id)
            if current == extractive_summary:
                await self._wm.put_summary(tenant, conversation_id, extractive_summary.model_copy(
                    update={"text": answer.summary.strip(), "source": "model"}))
                metrics.summaries_total.labels("model").inc()
        except (LlmUnavailable, LlmInvalid) as exc:
            fell_back("summary", exc)
        except EngramError as exc:
            log.warning("storing the model's summary failed (%s); the extractive one stays", exc)

    async def settle(self) -> None:
        """Wait for the model summaries under way (tests, shutdown)."""
        await asyncio.gather(*list(self._pending.values()), return_exceptions=True)
