"""The chat-model path: structured asks with validation, budgets and a breaker; every caller keeps an offline path."""
from shared.llm.client import LlmClient, fell_back, open_llm, parse
from shared.llm.schemas import Purpose

__all__ = ["LlmClient", "Purpose", "fell_back", "open_llm", "parse"]
