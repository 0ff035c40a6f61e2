"""Quality floor: evidence recall@10 on the LoCoMo dev conversations through the plain-function path.

A regression guard on retrieval quality (not a timing): compress every session window by window, store,
ask every category 1-4 question, and require all its evidence turns among the top 10 entries' sources.
"""

from shared.evaluation.plain import ConversationScore

# Measured 0.81-0.82 at ~1,700-1,900 tokens (see README, "Retrieval quality"); the bar is 0.80 / 2,000.
FLOOR_ALL_AT_10 = 0.80
CEILING_CONTEXT_TOKENS = 2_000


async def test_locomo_evidence_recall_at_10_holds_its_floor(
        locomo_plain_scores: dict[str, ConversationScore]) -> None:
    """Over the LoCoMo dev conversations, mean evidence recall@10 stays at or above 0.80 with mean context at or
    under 2,000 tokens."""
    scores = list(locomo_plain_scores.values())
    assert len(scores) >= 2, "expected the two dev conversations"
    for s in scores:
        print(f"{s.sample_id}: all@10={s.overall.all_at_k:.3f} any@10={s.overall.any_at_k:.3f} "
              f"tokens={s.mean_context_tokens:.0f} "
              + " ".join(f"cat{c}={v.all_at_k:.3f}" for c, v in s.categories.items()))
    mean_all = sum(s.overall.all_at_k for s in scores) / len(scores)
    mean_tokens = sum(s.mean_context_tokens for s in scores) / len(scores)
    assert mean_all >= FLOOR_ALL_AT_10, f"all@10 fell to {mean_all:.3f}"
    assert mean_tokens <= CEILING_CONTEXT_TOKENS, f"context grew to {mean_tokens:.0f} tokens"
