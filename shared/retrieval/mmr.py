"""Maximal marginal relevance: trade a little relevance for less repetition among the hits."""
import numpy as np

from shared.store import ScoredEntry


def mmr(hits: list[ScoredEntry], k: int, lambda_: float) -> list[ScoredEntry]:
    """Pick `k` hits greedily by lambda * relevance - (1 - lambda) * max similarity to those already picked.

    Hits without a vector keep their rank order after the diverse ones.
    """
    with_vec = [h for h in hits if h.vector is not None]
    if len(with_vec) <= 1:
        return hits[:k]
    vectors = np.asarray([h.vector for h in with_vec], dtype=float)
    relevance = np.asarray([h.score for h in with_vec], dtype=float)
    relevance = relevance / (relevance.max() or 1.0)
    similarity = vectors @ vectors.T
    chosen: list[int] = []
    candidates = list(range(len(with_vec)))
    while candidates and len(chosen) < k:
        redundancy = similarity[np.ix_(candidates, chosen)].max(axis=1) if chosen else np.zeros(len(candidates))
        scores = lambda_ * relevance[candidates] - (1 - lambda_) * redundancy
        best = candidates[int(np.argmax(scores))]
        chosen.append(best)
        candidates.remove(best)
    picked = [with_vec[i] for i in chosen]
    rest = [h for h in hits if h.vector is None]
    return (picked + rest)[:k]
