"""Which compressor and fact extractor the settings ask for (the ingestor and a rebuild use the same)."""
from shared.compress.facts import RuleFactExtractor
from shared.compress.llm import LlmCompressor, LlmFactExtractor
from shared.compress.model import Compressor, FactExtractor
from shared.compress.offline import OfflineCompressor
from shared.llm import LlmClient
from shared.settings import Settings


def compression(settings: Settings, llm: LlmClient | None) -> tuple[Compressor, FactExtractor | None]:
    """The compressor and fact extractor settings ask for: the model's, each with its offline path, or offline."""
    offline = OfflineCompressor(settings.context_turn_chars, settings.bm25_language)
    compressor: Compressor = offline
    if llm is not None and settings.llm_compress:
        compressor = LlmCompressor(llm, offline, settings.bm25_language)
    facts: FactExtractor | None = None
    if settings.extract_facts:
        rules = RuleFactExtractor()
        facts = LlmFactExtractor(llm, rules, settings.bm25_language) if llm is not None and settings.llm_facts \
            else rules
    return compressor, facts
