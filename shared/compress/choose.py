"""Which compressor and fact extractor the settings ask for (the ingestor and a rebuild use the same)."""
from shared.compress.facts import RuleFactExtractor
from shared.compress.llm import LlmCompressor, LlmFactExtractor
from shared.compress.model import Compressor, FactExtractor
from shared.compress.offline import OfflineCompressor
from shared.compress.workers import BudgetedCompressor, BudgetedRules, TextWorkers
from shared.llm import LlmClient
from shared.settings import Settings


def compression(settings: Settings, llm: LlmClient | None,
                workers: TextWorkers | None = None) -> tuple[Compressor, FactExtractor | None]:
    """The compressor and fact extractor settings ask for: the model's, each with its offline path, or offline.

    Args:
        workers: where the offline work runs within its time budget (the ingestor's); None: on a thread here.
    """
    offline: Compressor = BudgetedCompressor(workers) if workers is not None else \
        OfflineCompressor(settings.context_turn_chars, settings.bm25_language)
    compressor: Compressor = offline
    if llm is not None and settings.llm_compress:
        compressor = LlmCompressor(llm, offline, settings.bm25_language)
    facts: FactExtractor | None = None
    if settings.extract_facts:
        rules: FactExtractor = BudgetedRules(workers) if workers is not None else RuleFactExtractor()
        facts = LlmFactExtractor(llm, rules, settings.bm25_language) if llm is not None and settings.llm_facts \
            else rules
    return compressor, facts
