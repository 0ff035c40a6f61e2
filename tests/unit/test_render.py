"""The context block respects the token budget, counted with a real tokenizer."""
from datetime import UTC, datetime

from shared.retrieval.mmr import mmr
from shared.retrieval.render import render
from shared.store import MemoryEntry, ScoredEntry
from shared.text import tokens
from tests.support.turns import make_turn

NOW = datetime(2023, 5, 8, tzinfo=UTC)


def hit(text: str, score: float = 1.0, vector: list[float] | None = None) -> ScoredEntry:
    entry = MemoryEntry(id=text[:8], tenant_id="t", conversation_id="c", text=text, occurred_at=NOW,
                        created_at=NOW, updated_at=NOW)
    return ScoredEntry(entry=entry, score=score, vector=vector)


def test_tokens_are_counted_by_a_real_bpe() -> None:
    """Tokens are counted and truncated by a real BPE tokenizer, with the default encoding and with o200k_base."""
    assert tokens.count("hello world") == 2
    assert tokens.count("hello world", "o200k_base") == 2
    assert tokens.truncate("one two three four", 2) == "one two"


def test_without_a_budget_everything_is_rendered_in_rank_order() -> None:
    """Without a budget every hit is rendered in rank order, and the token count reported is the rendered text's."""
    hits = [hit("Ana moved to Lisbon."), hit("Ana likes sardines.")]
    text, used, kept = render(hits, [], None)
    assert text.index("Lisbon") < text.index("sardines")
    assert used == tokens.count(text) and kept == hits


def test_the_budget_is_never_exceeded_and_later_shorter_entries_still_fit() -> None:
    """For any budget the reported token count is the rendered text's and within the budget, and an entry too long to
    fit is skipped so a later, shorter one still gets in."""
    hits = [hit("Ana moved to Lisbon in May 2023. " * 3), hit("word " * 200), hit("Ana likes sardines.")]
    for budget in (5, 20, 40, 60, 300):
        text, used, kept = render(hits, [], budget)
        assert used <= budget, (budget, used)
        assert tokens.count(text) == used
    _, _, kept = render(hits, [], 60)
    assert [h.entry.text for h in kept] == [hits[0].entry.text, hits[2].entry.text]


def test_the_best_entry_is_truncated_rather_than_dropped() -> None:
    """A top entry longer than the whole budget is kept, truncated to fit the budget."""
    _, used, kept = render([hit("word " * 500)], [], 30)
    assert len(kept) == 1 and used <= 30


def test_recent_turns_follow_entries_newest_kept() -> None:
    """Recent turns are rendered after the entries, and when the budget runs short the newest turns are kept and the
    oldest dropped."""
    turns = [make_turn(f"turn number {i} " * 5) for i in range(10)]
    text, used, _ = render([hit("Ana moved to Lisbon.")], turns, 80)
    assert used <= 80 and "Recent turns:" in text and "turn number 9" in text and "turn number 0" not in text


def test_mmr_prefers_a_different_second_hit() -> None:
    """MMR with diversity picks a dissimilar second hit over a near-duplicate, while lambda 1.0 keeps pure relevance
    order."""
    same, other = [1.0, 0.0], [0.0, 1.0]
    hits = [hit("a first", 1.0, same), hit("b dupe", 0.95, same), hit("c other", 0.9, other)]
    assert [h.entry.text for h in mmr(hits, 2, 0.5)] == ["a first", "c other"]
    assert [h.entry.text for h in mmr(hits, 2, 1.0)] == ["a first", "b dupe"]


def test_texts_beyond_the_tokenizer_s_own_limit_are_counted_and_truncated_in_pieces() -> None:
    """Texts longer than the tokenizer takes in one call are counted in proportion to their length and truncated to just
    under the limit, and render still fits them to the budget."""
    long = ("我昨天在杭州的西湖边散步，看到很多人在划船。\n" * 30_000)  # about 690,000 characters
    whole = tokens.count(long)
    assert whole > 200_000  # more than bpe-openai takes in one call
    assert tokens.count(long[:10_000]) * 60 < whole < tokens.count(long[:10_000]) * 80
    cut = tokens.truncate(long, 250_000)
    assert long.startswith(cut) and 249_000 <= tokens.count(cut) <= 250_000
    _, used, kept = render([hit(long)], [], 1000)
    assert used <= 1000 and len(kept) == 1
