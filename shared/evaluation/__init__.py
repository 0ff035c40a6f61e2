"""Measuring engram: evidence recall on LoCoMo through the plain functions or over NATS, against baselines."""
from shared.evaluation.plain import evaluate, ingest_conversation

__all__ = ["evaluate", "ingest_conversation"]
