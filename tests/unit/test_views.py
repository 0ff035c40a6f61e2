"""What the wire shows of a stored entry: projected field by field, and replies that fit one NATS message."""
from datetime import UTC, datetime

import pytest

from engram_client.contract import EntriesResponse, EntryView, Explanation, RecalledEntry, RecallResponse, Turn
from engram_client.errors import EngramError
from shared.retrieval.fit import fit_page, fit_recall, size
from shared.retrieval.views import entry_view, recalled_entry, shared_fields
from shared.store import MemoryEntry, ScoredEntry

NOW = datetime(2023, 5, 8, tzinfo=UTC)


def entry(i: int, text: str = "Ana moved to Lisbon.") -> MemoryEntry:
    return MemoryEntry(id=f"00000000-0000-0000-0000-{i:012d}", tenant_id="t", user_id="u", conversation_id="c",
                       kind="fact", text=text, persons=["Ana"], occurred_at=NOW, created_at=NOW, updated_at=NOW,
                       source_turn_ids=[f"t{i}"])


def test_every_field_a_view_shows_is_a_field_of_the_stored_entry_with_the_same_type() -> None:
    """Every field the entry and recall views copy from a stored entry exists on MemoryEntry with the same type."""
    for view in (EntryView, RecalledEntry):
        for name in shared_fields(view):
            assert name in MemoryEntry.model_fields, f"{view.__name__}.{name} has no stored counterpart"
            assert MemoryEntry.model_fields[name].annotation == view.model_fields[name].annotation, name


def test_views_equal_what_validating_the_same_values_gives() -> None:
    """Views built without validation equal what validating their values gives, leave out the tenant, and carry a
    recall's score and explanation."""
    stored = entry(1)
    view = entry_view(stored)
    assert view == EntryView.model_validate(view.model_dump()) and view.kind == "fact"
    assert "tenant_id" not in view.model_dump()
    explained = Explanation(dense_rank=1, fused_score=0.5)
    recalled = recalled_entry(ScoredEntry(entry=stored, score=0.5), explained)
    assert recalled == RecalledEntry.model_validate(recalled.model_dump())
    assert (recalled.score, recalled.explanation, recalled.kind) == (0.5, explained, "fact")


def test_a_recall_reply_drops_its_lowest_ranked_entries_then_shortens_the_best_to_fit() -> None:
    """Without a size limit every hit is returned; under one the lowest-ranked entries go first, then the working
    memory, and then the best entry's text is cut with an ellipsis to fit."""
    hits = [ScoredEntry(entry=entry(i, "word " * 20_000), score=1.0 - i / 10) for i in range(5)]
    recent = [Turn(conversation_id="c", turn_id="r", speaker="Ana", role="user", text="hi", ts=NOW)]

    def build(candidates: list[ScoredEntry], turns: list[Turn]) -> RecallResponse:
        return RecallResponse(entries=[recalled_entry(h) for h in candidates], working_memory=turns,
                              context="\n\n".join(h.entry.text for h in candidates))

    assert len(fit_recall(build, hits, recent, None).entries) == 5
    two = fit_recall(build, hits, recent, 450_000)
    assert [e.id for e in two.entries] == [h.entry.id for h in hits[:2]] and size(two) <= 450_000
    one = fit_recall(build, hits, recent, 50_000)
    assert [e.id for e in one.entries] == [hits[0].entry.id] and one.working_memory == [] and size(one) <= 50_000
    assert one.entries[0].text.endswith("…")


def test_a_reply_by_budget_drops_the_entries_picked_last_and_keeps_rank_order() -> None:
    """Under a budget the entries are picked in another order than they are ranked (time's first, then by relevance:
    respond.picking_order); a reply too large for one message drops the ones picked last, not the lowest-ranked
    (which time may have put low though relevance picked it early), and gives the rest in rank order."""
    hits = [ScoredEntry(entry=entry(i, "word " * 20_000), score=1.0 - i / 10) for i in range(5)]
    picked = [hits[i].entry.id for i in (0, 3, 1, 4, 2)]

    def build(candidates: list[ScoredEntry], turns: list[Turn]) -> RecallResponse:
        return RecallResponse(entries=[recalled_entry(h) for h in candidates], working_memory=turns,
                              context="\n\n".join(h.entry.text for h in candidates))

    two = fit_recall(build, hits, [], 450_000, picked)
    assert [e.id for e in two.entries] == [hits[0].entry.id, hits[3].entry.id]
    three = fit_recall(build, hits, [], 650_000, picked)
    assert [e.id for e in three.entries] == [hits[i].entry.id for i in (0, 1, 3)]
    assert [e.id for e in fit_recall(build, hits, [], 450_000).entries] == [h.entry.id for h in hits[:2]]
    # room for none whole: the entry picked first is the one shortened; ids it does not hold are passed over
    [one] = fit_recall(build, hits, [], 50_000, ["elsewhere", *picked[1:], picked[0]]).entries
    assert one.id == hits[3].entry.id and one.text.endswith("…")


def test_a_page_that_does_not_fit_ends_early_and_its_cursor_loses_nothing() -> None:
    """An entries page too big for the limit ends early with its cursor at the first entry left out, and without a limit
    the page keeps every entry and the given cursor."""
    views = [entry_view(entry(i, "word " * 10_000)) for i in range(8)]
    page = fit_page(views, "next-page-id", 220_000)
    assert 1 <= len(page.entries) < 8 and size(page) <= 220_000
    assert page.next_cursor == views[len(page.entries)].id  # the first entry left out starts the next page
    whole = fit_page(views, "next-page-id", None)
    assert whole == EntriesResponse(entries=views, next_cursor="next-page-id")


def test_a_reply_that_cannot_fit_at_all_is_an_error_not_a_spin() -> None:
    """A recall reply that cannot fit the size limit even after shortening raises an error naming the limit instead of
    looping."""
    hit = ScoredEntry(entry=entry(1, "ab"), score=1.0)  # short text: shortening it cannot help

    def build(candidates: list[ScoredEntry], turns: list[Turn]) -> RecallResponse:
        return RecallResponse(entries=[recalled_entry(h) for h in candidates], working_memory=turns)

    with pytest.raises(EngramError, match="cannot fit one NATS message of 50 bytes"):
        fit_recall(build, [hit], [], 50)
