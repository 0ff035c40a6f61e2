"""Merge groups are a pure function of the episodes: the same memory whatever runs came before."""
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.consolidation import merge
from shared.store import MemoryEntry

T0 = datetime(2024, 5, 6, tzinfo=UTC)


def episode(name: str, text: str, days: int, turns: list[str]) -> MemoryEntry:
    return MemoryEntry(id=name, tenant_id="t", user_id="u", conversation_id=f"c-{name}", text=text,
                       occurred_at=T0 + timedelta(days=days), created_at=T0, updated_at=T0, source_turn_ids=turns,
                       keywords=[name])


def run(entries: dict[str, MemoryEntry], vectors: dict[str, list[float]]) -> dict[str, MemoryEntry]:
    candidates = [merge.Candidate(entry=e, dense=vectors[e.id]) for e in entries.values()]
    out = dict(entries)
    for change in merge.changes(candidates, threshold=0.9, min_overlap=0.5):
        out[change.entry.id] = change.entry.model_copy(update=change.payload)
    return out


def state(entries: dict[str, MemoryEntry]) -> dict[str, Any]:
    return {i: (e.merged_into, e.merged_from, e.source_turn_ids, e.keywords) for i, e in sorted(entries.items())}


def test_a_merge_made_earlier_does_not_change_what_a_later_run_decides() -> None:
    """Merging over two runs gives the same groups, source turns and keywords as one run over all the episodes, a
    further run changes nothing, and every source turn stays held by a visible entry."""
    text = "We booked the cabin by Lake Bled for July and Mia brings her guitar"
    k, a = episode("k", text, 1, ["k1"]), episode("a", text + " tonight", 2, ["a1"])
    n = episode("n", "Cabin by Lake Bled booked for July; Mia brings the guitar", 0, ["k1", "n1"])
    vectors = {"k": [1.0, 0.0], "a": [0.99, 0.14], "n": [0.95, -0.31]}  # n is close to k, not to a
    history = run(run({"k": k, "a": a}, vectors) | {"n": n}, vectors)
    clean = run({"k": k, "a": a, "n": n}, vectors)
    assert state(history) == state(clean)
    assert state(run(history, vectors)) == state(history)  # and again changes nothing
    # k keeps a and nothing of n's; n (oldest) would have absorbed k only by a shared turn and close vectors.
    kept = {i for i, e in clean.items() if e.merged_into is None}
    assert all(set(e.source_turn_ids) <= {t for j in kept for t in clean[j].source_turn_ids} for e in clean.values())


def test_a_keeper_whose_group_is_gone_gets_its_own_lists_back() -> None:
    """When a keeper's merged members are gone, the next run gives it back only its own source turns and keywords and
    empties merged_from."""
    text = "We booked the cabin by Lake Bled for July and Mia brings her guitar"
    k, a = episode("k", text, 1, ["k1"]), episode("a", text, 2, ["a1"])
    vectors = {"k": [1.0, 0.0], "a": [1.0, 0.0]}
    merged = run({"k": k, "a": a}, vectors)
    assert merged["k"].source_turn_ids == ["k1", "a1"] and merged["a"].merged_into == "k"
    alone = run({"k": merged["k"]}, vectors)  # a was forgotten
    assert alone["k"].source_turn_ids == ["k1"] and alone["k"].keywords == ["k"] and alone["k"].merged_from == []


def test_same_fact_neighbourhoods_leave_no_unasked_candidate_behind() -> None:
    """Same-fact neighbourhoods put every never-checked candidate into disjoint groups of 2 to MAX_GROUP, and form none
    when every candidate was checked."""
    from datetime import UTC, datetime

    from shared.consolidation.same_fact import MAX_GROUP, Candidate, neighbourhoods
    from shared.store import MemoryEntry

    def candidate(i: int, checked: bool) -> Candidate:
        now = datetime(2024, 1, 1, tzinfo=UTC)
        entry = MemoryEntry(id=f"e{i:02d}", tenant_id="t", conversation_id="c", kind="fact", text=f"statement {i}",
                            occurred_at=now, created_at=now, updated_at=now, source_turn_ids=[f"t{i}"],
                            same_fact_checked=checked)
        return Candidate(entry=entry, dense=[1.0, 0.01 * i])

    # 15 near-identical statements, only the last three never asked about: each of those must be in a group.
    candidates = [candidate(i, checked=i < 12) for i in range(15)]
    groups = neighbourhoods(candidates)
    asked = {c.entry.id for group in groups for c in group}
    assert {"e12", "e13", "e14"} <= asked
    assert all(2 <= len(group) <= MAX_GROUP for group in groups)
    assert len(asked) == sum(len(g) for g in groups)  # disjoint
    assert neighbourhoods([candidate(i, checked=True) for i in range(5)]) == []


def test_a_forget_takes_an_erased_member_out_of_its_keepers_unions() -> None:
    """Mending after a merged member is forgotten leaves its keeper as if that member had never been merged, without its
    turns or keywords."""
    text = "We booked the cabin by Lake Bled for July and Mia brings her guitar"
    k, a, b = episode("k", text, 1, ["k1"]), episode("a", text, 2, ["a1"]), episode("b", text, 3, ["b1"])
    vectors = {"k": [1.0, 0.0], "a": [1.0, 0.0], "b": [1.0, 0.0]}
    merged = run({"k": k, "a": a, "b": b}, vectors)
    assert merged["k"].source_turn_ids == ["k1", "a1", "b1"]
    left = {i: e for i, e in merged.items() if i != "a"}  # "a" was forgotten
    mended = dict(left)
    for change in merge.mended(list(left.values()), {"a"}):
        mended[change.entry.id] = change.entry.model_copy(update=change.payload)
    assert state(mended) == state(run({"k": k, "b": b}, vectors))  # as if "a" had never been
    assert "a" not in mended["k"].keywords


def test_a_forget_of_a_keeper_makes_its_members_visible_with_their_own_lists() -> None:
    """Mending after a keeper is forgotten makes its members visible again with only their own source turns, and a
    second mend finds nothing to do."""
    text = "We booked the cabin by Lake Bled for July and Mia brings her guitar"
    k, a = episode("k", text, 1, ["k1"]), episode("a", text, 2, ["a1"])
    merged = run({"k": k, "a": a}, {"k": [1.0, 0.0], "a": [1.0, 0.0]})
    assert merged["a"].merged_into == "k"
    [change] = merge.mended([merged["a"]], {"k"})
    after = change.entry.model_copy(update=change.payload)
    assert after.merged_into is None and after.source_turn_ids == ["a1"]
    assert merge.mended([after], {"k"}) == []  # nothing more to mend


def test_the_same_turn_id_in_two_conversations_is_not_a_shared_source() -> None:
    """Products number turns per chat ("1", "2", ...): two chats months apart that both have a turn "1" are not
    near-duplicates by that, so the newer one (a changed fact) is never hidden behind the older one's text."""
    old = episode("old", "I play the guitar in a class every week", 0, ["1", "2"])
    new = episode("new", "Now I am learning the drums at a studio twice a week", 160, ["1", "2"])
    merged = run({"old": old, "new": new}, {"old": [1.0, 0.0], "new": [0.96, 0.28]})  # close vectors
    assert merged["new"].merged_into is None and merged["old"].merged_from == []


def chat(name: str, user: str, assistant: str, roles: tuple[str, str] = ("user", "assistant")) -> MemoryEntry:
    """A window of one user turn and one assistant reply, with its turns' lines and roles as the writer keeps them."""
    from shared.store import TurnLines
    entry = episode(name, f"[Mon 6 May 2024]\nMe: {user}\nBot: {assistant}", 0, [f"{name}1", f"{name}2"])
    return entry.model_copy(update={"turn_roles": list(roles), "turn_lines": [
        TurnLines(speaker="Me", first=1, last=1), TurnLines(speaker="Bot", first=2, last=2)]})


def test_an_assistant_saying_the_same_at_length_does_not_merge_what_the_user_said_differently() -> None:
    """Two windows whose assistant replies are the same long text and whose dense vectors are close stay apart when
    the user said different things in them (both stay visible, each with its own turns); the same user words merge;
    so do windows with the same words where every turn is a user's (people talking, roles all `user`)."""
    reply = ("Here are some general tips for planning a trip: check the weather forecast, book accommodation early, "
             "compare transport options, pack light layers, keep copies of documents and leave room for rest days.")
    close = {"a": [1.0, 0.0], "b": [0.99, 0.14]}
    apart = run({"a": chat("a", "I am flying to Lisbon on the 3rd with my sister.", reply),
                 "b": chat("b", "My knee surgery is in March, so hiking is out for now.", reply)}, close)
    assert apart["a"].merged_into is None and apart["b"].merged_into is None
    assert apart["b"].source_turn_ids == ["b1", "b2"]
    said = "I am flying to Lisbon on the 3rd with my sister."
    same = run({"a": chat("a", said, reply), "b": chat("b", said + " Really.", reply)}, close)
    assert same["b"].merged_into == "a"
    alone = run({"a": chat("a", reply, reply, ("assistant", "assistant")), "b": chat("b", said, reply)}, close)
    assert alone["b"].merged_into is None  # an assistant-only window does not absorb what a user said
    both = run({"a": chat("a", reply, reply, ("assistant", "assistant")),
                "b": chat("b", reply + " Again.", reply, ("assistant", "assistant"))}, close)
    assert both["b"].merged_into == "a"  # neither holds the user's words: all their words decide
    people = run({"a": chat("a", "I am flying to Lisbon on the 3rd.", reply, ("user", "user")),
                  "b": chat("b", "My knee surgery is in March.", reply, ("user", "user"))}, close)
    assert people["b"].merged_into == "a"  # no assistant: the whole window's words decide, as before
