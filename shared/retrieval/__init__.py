"""Retrieval: from a query to ranked memories and a rendered context, as plain functions."""
from shared.retrieval.recall import Retrieval, recall, search, warm_up

__all__ = ["Retrieval", "recall", "search", "warm_up"]
