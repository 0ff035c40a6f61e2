"""Retrieval: from a query to ranked memories and a rendered context, as plain functions."""
from shared.retrieval.recall import Retrieval, search, warm_up
from shared.retrieval.respond import recall

__all__ = ["Retrieval", "recall", "search", "warm_up"]
