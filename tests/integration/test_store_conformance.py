"""One conformance suite, run unchanged against Qdrant Edge and qdrant-client's local mode."""
import random
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from qdrant_client import AsyncQdrantClient

from shared.consolidation import outdated
from shared.errors import ConfigError
from shared.store import (
    Boost,
    ClientStore,
    Condition,
    EdgeStore,
    EntryFilter,
    HybridSearch,
    Scope,
    SparseVector,
    Store,
    StoredEntry,
    TimeRead,
    VectorRead,
    Vectors,
    entry_id,
)
from tests.support.ids import unique
from tests.support.store import T0, item


def query(dense: list[float], terms: list[int]) -> Vectors:
    return Vectors(dense=dense, sparse=SparseVector(indices=terms, values=[1.0] * len(terms)))


@pytest.fixture(params=["edge", "qdrant-client-local"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "edge":
        opened: Store = EdgeStore.open(tmp_path / "qdrant", 4)
    else:
        opened = await ClientStore.open(AsyncQdrantClient(location=":memory:"), unique("col"), 4)
    yield opened
    await opened.close()


async def test_upsert_is_idempotent_by_deterministic_id(store: Store) -> None:
    """An entry's id depends on its source turns, not their order, so writing it again replaces it instead of adding
    a second one."""
    tenant = unique("t")
    first = item(tenant, ["a", "b"], dense=[1, 0, 0, 0], terms=[1], text="first version")
    again = item(tenant, ["b", "a"], dense=[1, 0, 0, 0], terms=[1], text="second version")
    assert first.entry.id == again.entry.id  # order of source turns does not matter
    await store.upsert([first])
    await store.upsert([again])
    assert await store.count(Scope(tenant_id=tenant)) == 1
    [stored] = await store.get(Scope(tenant_id=tenant), [first.entry.id])
    assert stored.text == "second version"
    assert stored == again.entry


async def test_no_read_or_write_crosses_tenants(store: Store) -> None:
    """Under one tenant's scope, no query, get, scroll, count, payload update or delete reads or changes another
    tenant's entry with the same turns."""
    mine, theirs = unique("t"), unique("t")
    await store.upsert([item(mine, ["a"], dense=[1, 0, 0, 0], terms=[1, 2], text="mine"),
                        item(theirs, ["a"], dense=[1, 0, 0, 0], terms=[1, 2], text="theirs")])
    scope = Scope(tenant_id=mine)
    their_id = entry_id(theirs, "c1", ["a"])
    hits = await store.hybrid_query(scope, query([1, 0, 0, 0], [1, 2]), limit=10, explain=True)
    assert [h.entry.text for h in hits] == ["mine"]
    assert await store.get(scope, [their_id]) == []
    assert [e.text for e in (await store.scroll(scope)).entries] == ["mine"]
    assert await store.count(scope) == 1
    await store.set_payload(scope, [their_id], {"importance": 0.0})
    assert await store.delete(scope, [their_id]) == 0
    assert await store.delete_where(scope) == 1
    [survivor] = (await store.scroll(Scope(tenant_id=theirs))).entries
    assert survivor.text == "theirs" and survivor.importance == 0.5


async def test_scope_narrows_to_user_and_conversation(store: Store) -> None:
    """A scope with a user, or a user and a conversation, counts and searches only that user's or that conversation's
    entries."""
    tenant = unique("t")
    await store.upsert([item(tenant, ["a"], dense=[1, 0, 0, 0], terms=[1], user="u1", conversation="c1"),
                        item(tenant, ["b"], dense=[1, 0, 0, 0], terms=[1], user="u1", conversation="c2"),
                        item(tenant, ["c"], dense=[1, 0, 0, 0], terms=[1], user="u2", conversation="c3")])
    assert await store.count(Scope(tenant_id=tenant)) == 3
    assert await store.count(Scope(tenant_id=tenant, user_id="u1")) == 2
    hits = await store.hybrid_query(Scope(tenant_id=tenant, user_id="u1", conversation_id="c2"),
                                    query([1, 0, 0, 0], [1]), limit=10)
    assert [h.entry.conversation_id for h in hits] == ["c2"]


async def test_the_same_user_and_conversation_ids_in_two_tenants_stay_apart(store: Store) -> None:
    """The same user and conversation ids in two tenants are different owners for every scope, and entries come back
    with the ids as written."""
    mine, theirs = unique("t"), unique("t")
    await store.upsert([item(mine, ["a"], dense=[1, 0, 0, 0], terms=[1], user="u1", conversation="c1", text="mine"),
                        item(theirs, ["a"], dense=[1, 0, 0, 0], terms=[1], user="u1", conversation="c1",
                             text="theirs")])
    for scope in (Scope(tenant_id=mine, user_id="u1"), Scope(tenant_id=mine, conversation_id="c1"),
                  Scope(tenant_id=mine, user_id="u1", conversation_id="c1")):
        hits = await store.hybrid_query(scope, query([1, 0, 0, 0], [1]), limit=10)
        assert [h.entry.text for h in hits] == ["mine"]
        assert await store.count(scope) == 1
    [entry] = (await store.scroll(Scope(tenant_id=mine, user_id="u1"))).entries
    assert entry.user_id == "u1" and entry.conversation_id == "c1"  # the derived keys never reach callers


async def test_bm25_idf_counts_only_the_scope_s_own_entries(store: Store) -> None:
    """A sparse score depends only on the entries in the query's scope: other tenants or other users leave it
    unchanged, the tenant's own entries move it."""
    mine, theirs = unique("t"), unique("t")
    await store.upsert([item(mine, ["a"], dense=[1, 0, 0, 0], terms=[1], user="u1", text="rare word"),
                        item(mine, ["b"], dense=[0, 1, 0, 0], terms=[2], user="u1", text="other word")])

    async def score(scope: Scope) -> float | None:
        [hit] = await store.search(scope, query([1, 0, 0, 0], [1]), using="sparse", limit=1)
        [explained] = await store.hybrid_query(scope, query([1, 0, 0, 0], [1]), limit=1, explain=True)
        assert explained.sparse_score == pytest.approx(hit.score)
        return hit.score

    by_user, by_tenant = await score(Scope(tenant_id=mine, user_id="u1")), await score(Scope(tenant_id=mine))
    # Term 1 becomes common elsewhere: in another tenant, and for another user of the same tenant.
    await store.upsert([item(theirs, [f"x{i}"], dense=[1, 0, 0, 0], terms=[1], user="u1") for i in range(20)])
    assert await score(Scope(tenant_id=mine, user_id="u1")) == pytest.approx(by_user)
    assert await score(Scope(tenant_id=mine)) == pytest.approx(by_tenant)
    await store.upsert([item(mine, [f"y{i}"], dense=[1, 0, 0, 0], terms=[1], user="u2") for i in range(20)])
    assert await score(Scope(tenant_id=mine, user_id="u1")) == pytest.approx(by_user)
    assert await score(Scope(tenant_id=mine)) < by_tenant  # the tenant's own statistics did change


async def test_a_search_can_count_idf_over_the_entries_it_names(store: Store) -> None:
    """With `idf_corpus`, a hybrid search's BM25 counts IDF over those entries of the scope only: facts that repeat an
    episode's word a great deal leave the episodes' fused scores unchanged, where without it they move them."""
    tenant = unique("t")
    scope, episodes = Scope(tenant_id=tenant), EntryFilter(kinds=["episodic"])
    # Dense ranks a, b, c (no ties); "a" holds the rare term 1, "b" holds term 3 twice as strongly.
    await store.upsert([item(tenant, ["a"], dense=[1, 0, 0, 0], terms=[1, 2], text="a"),
                        item(tenant, ["b"], dense=[0.8, 0.6, 0, 0], terms=[3], weights=[2.0], text="b"),
                        item(tenant, ["c"], dense=[0.6, 0.8, 0, 0], terms=[4], text="c")])

    async def fused() -> dict[str, dict[str, float]]:
        found = await store.hybrid_batch(scope, [
            HybridSearch(vectors=query([1, 0, 0, 0], [1, 3]), limit=5, entry_filter=episodes, idf_corpus=episodes),
            HybridSearch(vectors=query([1, 0, 0, 0], [1, 3]), limit=5, entry_filter=episodes)])
        return {name: {h.entry.text: round(h.score, 6) for h in hits}
                for name, hits in zip(("corpus", "scope"), found, strict=True)}

    before = await fused()
    await store.upsert([item(tenant, [f"f{i}"], dense=[0, 0, 0, 1], terms=[3], kind="fact", text=f"f{i}")
                        for i in range(30)])
    after = await fused()
    assert after["corpus"] == before["corpus"]
    assert after["scope"] != before["scope"], (before, after)  # term 3 is common now: "a" outranks "b" in BM25


@pytest.mark.parametrize("idf_corpus", [None, EntryFilter(kinds=["episodic"])])
async def test_explained_ranks_give_back_the_fused_scores(store: Store, idf_corpus: EntryFilter | None) -> None:
    """The ranks an explained batch reports are the ones the fusion saw: reciprocal rank fusion over them gives the
    engine's fused score of every hit, for any k, with the IDF over the scope or over a part of it."""
    rnd = random.Random(1)
    tenant = unique("t")
    await store.upsert([item(tenant, [f"e{i}"], dense=[rnd.random() for _ in range(4)],
                             terms=rnd.sample(range(1, 9), 3), weights=[rnd.random() + 0.1 for _ in range(3)])
                        for i in range(40)]
                       + [item(tenant, [f"f{i}"], dense=[0, 0, 0, 1], terms=[2], kind="fact") for i in range(20)])
    for k in (1, 3, 60):
        search = HybridSearch(vectors=Vectors(dense=[0.3, 0.5, 0.1, 0.9], sparse=SparseVector(
            indices=[1, 2, 3], values=[1.0, 1.0, 1.0])), limit=10, prefetch_limit=20, rrf_k=k,
            entry_filter=EntryFilter(kinds=["episodic"]), idf_corpus=idf_corpus)
        [hits] = await store.hybrid_batch(Scope(tenant_id=tenant), [search], explain=True)
        assert len(hits) == 10
        fused = outdated.shared_ranks(hits, k)  # (random weights: no two hits tie)
        assert all(fused[h.entry.id] == pytest.approx(h.score, rel=1e-5) for h in hits), k


async def test_payload_filters(store: Store) -> None:
    """Entries are filtered by persons (any of), kind, topic, location, a time range, and whether they are
    superseded, in scroll, query and count alike."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant)
    await store.upsert([
        item(tenant, ["a"], dense=[1, 0, 0, 0], terms=[1], persons=["Ana", "Bo"], days=0, topic="travel"),
        item(tenant, ["b"], dense=[1, 0, 0, 0], terms=[1], persons=["Cy"], days=10, kind="fact", location="Lisbon"),
        item(tenant, ["c"], dense=[1, 0, 0, 0], terms=[1], persons=["Bo"], days=20, superseded_by="x"),
    ])

    async def turns(entry_filter: EntryFilter) -> list[str]:
        page = await store.scroll(scope, entry_filter=entry_filter)
        return sorted(t for e in page.entries for t in e.source_turn_ids)

    assert await turns(EntryFilter(persons=["Bo"])) == ["a", "c"]
    assert await turns(EntryFilter(persons=["Cy", "Ana"])) == ["a", "b"]
    assert await turns(EntryFilter(kinds=["fact"])) == ["b"]
    assert await turns(EntryFilter(topics=["travel"])) == ["a"]
    assert await turns(EntryFilter(location="Lisbon")) == ["b"]
    assert await turns(EntryFilter(since=T0 + timedelta(days=5))) == ["b", "c"]
    assert await turns(EntryFilter(until=T0 + timedelta(days=10))) == ["a", "b"]
    assert await turns(EntryFilter(since=T0 + timedelta(days=5), until=T0 + timedelta(days=15))) == ["b"]
    assert await turns(EntryFilter(include_superseded=False)) == ["a", "b"]
    hits = await store.hybrid_query(scope, query([1, 0, 0, 0], [1]), limit=10,
                                    entry_filter=EntryFilter(persons=["Bo"], include_superseded=False))
    assert [h.entry.source_turn_ids for h in hits] == [["a"]]
    assert await store.count(scope, EntryFilter(persons=["Bo"])) == 2


async def test_hybrid_query_fuses_dense_and_sparse_and_explains_ranks(store: Store) -> None:
    """A hybrid query ranks first the entry close by meaning and by words, reports each hit's dense and sparse ranks,
    and returns vectors only on request."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant)
    await store.upsert([
        item(tenant, ["dense"], dense=[1, 0, 0, 0], terms=[99], text="close in meaning"),
        item(tenant, ["sparse"], dense=[0, 0, 0, 1], terms=[7, 8], text="shares the words"),
        item(tenant, ["both"], dense=[0.9, 0.1, 0, 0], terms=[7], text="both"),
        item(tenant, ["neither"], dense=[0, 1, 0, 0], terms=[50], text="neither"),
    ])
    hits = await store.hybrid_query(scope, query([1, 0, 0, 0], [7, 8]), limit=3, explain=True, prefetch_limit=2)
    texts = [h.entry.text for h in hits]
    assert texts[0] == "both" and set(texts) == {"both", "close in meaning", "shares the words"}
    by_text = {h.entry.text: h for h in hits}
    assert by_text["close in meaning"].dense_rank == 1 and by_text["close in meaning"].sparse_rank is None
    assert by_text["shares the words"].sparse_rank == 1
    assert by_text["both"].dense_rank == 2 and by_text["both"].sparse_rank == 2
    assert all(h.score > 0 for h in hits)
    assert hits[0].vector is None
    dense_only = await store.search(scope, query([1, 0, 0, 0], [7, 8]), using="dense", limit=2)
    assert [h.entry.text for h in dense_only] == ["close in meaning", "both"]
    sparse_only = await store.search(scope, query([1, 0, 0, 0], [7, 8]), using="sparse", limit=2)
    assert [h.entry.text for h in sparse_only] == ["shares the words", "both"]
    other = await store.search(Scope(tenant_id=unique("t")), query([1, 0, 0, 0], [7, 8]), using="dense", limit=2)
    assert other == []
    [with_vector] = await store.hybrid_query(scope, query([1, 0, 0, 0], [7, 8]), limit=1, with_vectors=True)
    assert with_vector.vector is not None and len(with_vector.vector) == 4


async def test_equal_fused_scores_come_back_in_id_order_whatever_the_order_written(store: Store) -> None:
    """Pairs of entries whose ranks mirror each other (1st by meaning and 2nd by words, against 2nd and 1st) tie in
    the fusion; each pair comes back in id order, and the one kept at a cut between them is the smaller id, in two
    tenants written in opposite orders and on every ask (the engine alone orders ties in no fixed order)."""
    for written in (0, 1):
        tenant = unique("t")
        scope = Scope(tenant_id=tenant)
        pair = [item(tenant, [f"p{n}"], dense=[1, 0.1 * (n + 1), 0, 0], terms=[1] if n == 0 else [1, 2],
                     text=f"tied {n}") for n in range(2)]
        await store.upsert(pair if written == 0 else pair[::-1])
        ids = sorted(p.entry.id for p in pair)
        for _ in range(5):
            hits = await store.hybrid_query(scope, query([1, 0, 0, 0], [1, 2]), limit=2, explain=True)
            assert [(h.dense_rank, h.sparse_rank) for h in sorted(hits, key=lambda h: h.entry.text)] == [(1, 2),
                                                                                                       (2, 1)]
            assert hits[0].score == hits[1].score and [h.entry.id for h in hits] == ids
            [kept] = await store.hybrid_query(scope, query([1, 0, 0, 0], [1, 2]), limit=1)
            assert kept.entry.id == ids[0]
            [batched] = await store.hybrid_batch(scope, [HybridSearch(vectors=query([1, 0, 0, 0], [1, 2]), limit=1)])
            assert [h.entry.id for h in batched] == ids[:1]


async def test_boosts_reorder_the_fused_candidates_in_the_store(store: Store) -> None:
    """Boosts multiply the fused scores of the candidates matching any of their conditions (several boosts add up),
    never reach entries outside the candidates or the tenant, and reorder what comes back."""
    tenant, other = unique("t"), unique("t")
    scope = Scope(tenant_id=tenant)
    # Fused order without boosts: first, second, third, fourth (dense and sparse agree, with no ties: equal BM25
    # scores would let the engine order third and fourth either way).
    await store.upsert([
        item(tenant, ["first"], dense=[1, 0, 0, 0], terms=[1, 2, 3], persons=["Ana"]),
        item(tenant, ["second"], dense=[0.9, 0.3, 0, 0], terms=[1, 2], days=30),
        item(tenant, ["third"], dense=[0.7, 0.7, 0, 0], terms=[1], persons=["Bo"], days=30),
        item(tenant, ["fourth"], dense=[0.2, 1, 0, 0], terms=[1, 9], weights=[0.5, 1.0], persons=["Bo"], days=30),
        item(other, ["theirs"], dense=[1, 0, 0, 0], terms=[1, 2, 3], persons=["Bo"], days=30),
    ])
    vectors = query([1, 0, 0, 0], [1, 2, 3])

    async def order(boosts: list[Boost], limit: int = 2, candidates: int = 4) -> list[str]:
        hits = await store.hybrid_query(scope, vectors, limit=limit, boosts=boosts, candidates=candidates)
        return [h.entry.source_turn_ids[0] for h in hits]

    assert await order([]) == ["first", "second"]
    bo = Boost(weight=2.0, any_of=[Condition(key="persons", op="any", value=["Bo", "bo"])])
    assert await order([bo]) == ["third", "fourth"]  # raised above the unboosted, only `limit` come back
    assert await order([bo], candidates=2) == ["first", "second"]  # outside the candidates, no boost reaches
    month = Boost(weight=2.0, any_of=[Condition(key="occurred_at", op="range", gte=T0 + timedelta(days=29),
                                                lt=T0 + timedelta(days=31))])
    assert await order([month], limit=4) == ["second", "third", "fourth", "first"]
    # A hit matching several boosts gets them all; any condition of one boost is enough for it.
    either = Boost(weight=0.5, any_of=[Condition(key="persons", op="any", value=["Ana"]),
                                       Condition(key="occurred_at", op="range", gte=T0 + timedelta(days=29))])
    hits = await store.hybrid_query(scope, vectors, limit=4, candidates=4, boosts=[bo, either])
    plain = {h.entry.id: h.score for h in await store.hybrid_query(scope, vectors, limit=4)}
    for hit in hits:
        factor = 1 + (2.0 if "Bo" in hit.entry.persons else 0) + 0.5
        assert hit.score == pytest.approx(plain[hit.entry.id] * factor, rel=1e-4)
    assert "theirs" not in [h.entry.source_turn_ids[0] for h in hits]


async def test_scroll_pages_cover_everything_once(store: Store) -> None:
    """Paging through a scroll returns each of the tenant's entries exactly once."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant)
    await store.upsert([item(tenant, [f"t{i}"], dense=[1, i, 0, 0], terms=[i + 1]) for i in range(25)])
    seen: list[str] = []
    offset = None
    while True:
        page = await store.scroll(scope, limit=10, offset=offset)
        seen += [e.id for e in page.entries]
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert len(seen) == len(set(seen)) == 25


async def test_newest_orders_by_time_and_pages_by_the_last_instant(store: Store) -> None:
    """`newest` returns the most recent entries first, within the scope and filter; narrowing `until` to the last
    instant seen gives the next page, that instant included (entries of one instant share it)."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant, user_id="u1")
    days = [5, 1, 9, 3, 9, 7, 0, 3]
    await store.upsert([item(tenant, [f"t{i}"], dense=[1, 0, 0, 0], terms=[1], days=d) for i, d in enumerate(days)]
                       + [item(tenant, ["other"], dense=[1, 0, 0, 0], terms=[1], days=20, user="u2"),
                          item(unique("t"), ["x"], dense=[1, 0, 0, 0], terms=[1], days=30)])
    first = await store.newest(scope, limit=3)
    assert [(e.occurred_at - T0).days for e in first] == [9, 9, 7]
    rest = await store.newest(scope, entry_filter=EntryFilter(until=first[-1].occurred_at), limit=10)
    assert [(e.occurred_at - T0).days for e in rest] == [7, 5, 3, 3, 1, 0]
    facts = await store.newest(scope, entry_filter=EntryFilter(kinds=["fact"]), limit=10)
    assert facts == []


async def test_earliest_orders_by_time_within_the_scope_and_filter(store: Store) -> None:
    """`earliest` returns the oldest entries first, within the scope (another user's, another conversation's and
    another tenant's earlier entries never among them) and the filter's time range, cut at the limit after
    ordering."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant, user_id="u1")
    days = [5, 1, 9, 3, 7, 0]
    await store.upsert([item(tenant, [f"t{i}"], dense=[1, 0, 0, 0], terms=[1], days=d) for i, d in enumerate(days)]
                       + [item(tenant, ["other"], dense=[1, 0, 0, 0], terms=[1], days=2, user="u2"),
                          item(tenant, ["elsewhere"], dense=[1, 0, 0, 0], terms=[1], days=4, conversation="c2"),
                          item(unique("t"), ["x"], dense=[1, 0, 0, 0], terms=[1], days=2)])
    assert [(e.occurred_at - T0).days for e in await store.earliest(scope, limit=3)] == [0, 1, 3]
    one = Scope(tenant_id=tenant, user_id="u1", conversation_id="c1")
    after = await store.earliest(one, entry_filter=EntryFilter(since=T0 + timedelta(days=2),
                                                                 until=T0 + timedelta(days=8)), limit=10)
    assert [(e.occurred_at - T0).days for e in after] == [3, 5, 7]
    first_two = await store.earliest(one, entry_filter=EntryFilter(since=T0 + timedelta(days=2)), limit=2)
    assert [(e.occurred_at - T0).days for e in first_two] == [3, 5]


async def test_delete_by_ids_and_by_filter_and_update_payload(store: Store) -> None:
    """Payload updates are read back, deletes by id count only entries that existed, deletes by scope remove that
    conversation's entries, and empty lists do nothing."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant)
    items = [item(tenant, [f"t{i}"], dense=[1, 0, 0, 0], terms=[1], conversation=f"c{i % 2}") for i in range(6)]
    await store.upsert(items)
    await store.set_payload(scope, [items[0].entry.id], {"importance": 0.9, "access_count": 3})
    [updated] = await store.get(scope, [items[0].entry.id])
    assert (updated.importance, updated.access_count) == (0.9, 3)
    assert await store.delete(scope, [items[0].entry.id, "00000000-0000-0000-0000-000000000000"]) == 1
    assert await store.delete_where(Scope(tenant_id=tenant, conversation_id="c1")) == 3
    assert await store.count(scope) == 2
    assert await store.get(scope, []) == [] and await store.delete(scope, []) == 0


async def test_there_is_no_query_without_a_tenant(store: Store) -> None:
    """A store call without a Scope object raises TypeError, and a Scope cannot be built without a non-empty tenant."""
    with pytest.raises(TypeError):
        await store.count(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await store.scroll({"tenant_id": "x"})  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Scope(tenant_id="")
    with pytest.raises(ValidationError):
        Scope()  # type: ignore[call-arg]


async def test_edge_store_keeps_its_data_across_a_restart(tmp_path: Path) -> None:
    """An entry written to a Qdrant Edge shard is found again after the shard is closed and opened."""
    tenant = unique("t")
    first = EdgeStore.open(tmp_path / "q", 4)
    await first.upsert([item(tenant, ["a"], dense=[1, 0, 0, 0], terms=[1], text="remember me")])
    await first.close()
    second = EdgeStore.open(tmp_path / "q", 4)
    try:
        hits = await second.hybrid_query(Scope(tenant_id=tenant), query([1, 0, 0, 0], [1]), limit=1)
        assert [h.entry.text for h in hits] == ["remember me"]
    finally:
        await second.close()


async def test_a_shard_written_with_the_old_scope_layout_is_refused(tmp_path: Path) -> None:
    """Opening a shard laid out by an older engram (a plain user_id index) fails with a config error naming the older
    engram."""
    import qdrant_edge as qe

    shard = qe.EdgeShard.create(str(tmp_path / "old"), qe.EdgeConfig(
        vectors={"dense": qe.EdgeVectorParams(size=4, distance=qe.Distance.Cosine)},
        sparse_vectors={"sparse": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)}))
    shard.update(qe.UpdateOperation.create_field_index("user_id", qe.PayloadSchemaType.Keyword))
    shard.flush()
    shard.close()
    with pytest.raises(ConfigError, match="older engram"):
        EdgeStore.open(tmp_path / "old", 4)


async def test_active_only_hides_superseded_and_merged_away_entries(store: Store) -> None:
    """The active-only filter hides superseded and merged-away entries from queries and counts, while an unfiltered
    count still sees them."""
    tenant = unique("t")
    await store.upsert([item(tenant, ["a"], dense=[1, 0, 0, 0], terms=[1], text="current"),
                        item(tenant, ["b"], dense=[1, 0, 0, 0], terms=[1], text="old", superseded_by="x"),
                        item(tenant, ["c"], dense=[1, 0, 0, 0], terms=[1], text="absorbed", merged_into="y")])
    scope = Scope(tenant_id=tenant)
    active = EntryFilter(include_superseded=False, include_merged=False)
    hits = await store.hybrid_query(scope, query([1, 0, 0, 0], [1]), limit=10, entry_filter=active)
    assert [h.entry.text for h in hits] == ["current"]
    assert await store.count(scope, active) == 1
    assert await store.count(scope) == 3


async def test_facts_are_found_by_slot_key(store: Store) -> None:
    """A slot_keys filter returns the fact in that slot and not the same subject's other slots."""
    tenant = unique("t")
    await store.upsert([item(tenant, ["a"], dense=[1, 0, 0, 0], terms=[1], kind="fact", slot_key="ana\x1flives_in"),
                        item(tenant, ["b"], dense=[1, 0, 0, 0], terms=[1], kind="fact", slot_key="ana\x1fdiet")])
    page = await store.scroll(Scope(tenant_id=tenant), entry_filter=EntryFilter(slot_keys=["ana\x1flives_in"]))
    assert [e.source_turn_ids for e in page.entries] == [["a"]]


async def test_a_scroll_can_return_dense_vectors(store: Store) -> None:
    """A scroll returns the stored dense vectors when asked to, and none otherwise."""
    tenant = unique("t")
    await store.upsert([item(tenant, ["a"], dense=[0.6, 0.8, 0, 0], terms=[1])])
    page = await store.scroll(Scope(tenant_id=tenant), with_vectors=True)
    assert page.dense is not None and page.dense[0] == pytest.approx([0.6, 0.8, 0, 0], abs=1e-6)
    assert (await store.scroll(Scope(tenant_id=tenant))).dense is None


async def test_tenants_lists_every_tenant_with_entries_and_nothing_else(store: Store) -> None:
    """The tenant listing includes every tenant with entries, each once."""
    first, second = unique("t"), unique("t")
    await store.upsert([item(first, ["a"], dense=[1, 0, 0, 0], terms=[1]),
                        item(first, ["b"], dense=[1, 0, 0, 0], terms=[1]),
                        item(second, ["a"], dense=[1, 0, 0, 0], terms=[1])])
    listed = await store.tenants()
    assert {first, second} <= set(listed)
    assert len(listed) == len(set(listed))


ONE = [1.0, 0.0, 0.0, 0.0]


def touched(stored: StoredEntry, days: int) -> StoredEntry:
    """The same entry, last written `days` after T0."""
    return StoredEntry(entry=stored.entry.model_copy(update={"updated_at": T0 + timedelta(days=days)}),
                       vectors=stored.vectors)


async def test_distinct_lists_the_owners_of_matching_entries_in_scope_only(store: Store) -> None:
    """`distinct` names each user (or conversation) with a matching entry once, sorted, never another tenant's;
    `without_user` keeps entries that name no user, `updated_since` those written since."""
    mine, theirs = unique("t"), unique("t")
    await store.upsert([item(mine, ["a"], user="u2", conversation="c1", dense=ONE, terms=[1]),
                        item(mine, ["b"], user="u2", conversation="c2", dense=ONE, terms=[1]),
                        touched(item(mine, ["c"], user="u1", conversation="c1", kind="fact", dense=ONE, terms=[1]), 3),
                        item(mine, ["d"], user=None, conversation="c4", dense=ONE, terms=[1]),
                        touched(item(mine, ["e"], user=None, conversation="c3", dense=ONE, terms=[1]), 5),
                        item(theirs, ["a"], user="u9", conversation="c9", dense=ONE, terms=[1])])
    scope = Scope(tenant_id=mine)
    assert await store.distinct(scope, "user_id") == ["u1", "u2"]
    assert await store.distinct(scope, "conversation_id") == ["c1", "c2", "c3", "c4"]
    assert await store.distinct(scope, "conversation_id", EntryFilter(without_user=True)) == ["c3", "c4"]
    assert await store.distinct(Scope(tenant_id=mine, user_id="u2"), "conversation_id") == ["c1", "c2"]
    assert await store.distinct(scope, "user_id", EntryFilter(kinds=["fact"])) == ["u1"]
    since = EntryFilter(updated_since=T0 + timedelta(days=1))
    assert await store.distinct(scope, "user_id", since) == ["u1"]
    assert await store.distinct(scope, "conversation_id", since.model_copy(update={"without_user": True})) == ["c3"]
    assert await store.distinct(Scope(tenant_id=unique("t")), "user_id") == []


async def test_kind_counts_count_every_tenants_entries_by_kind(store: Store) -> None:
    """`kind_counts` counts the store's entries of each kind across tenants, under the filter when given."""
    first, second = unique("t"), unique("t")
    await store.upsert([item(first, ["a"], dense=ONE, terms=[1]),
                        item(first, ["b"], last_accessed_at=T0, access_count=1, dense=ONE, terms=[1]),
                        item(first, ["c"], kind="fact", dense=ONE, terms=[1]),
                        item(second, ["a"], kind="profile", dense=ONE, terms=[1])])
    assert await store.kind_counts() == {"episodic": 2, "fact": 1, "profile": 1}
    assert await store.kind_counts(EntryFilter(never_recalled=True)) == {"episodic": 1, "fact": 1, "profile": 1}


async def test_a_batch_of_hybrid_searches_answers_each_like_one_query_and_stays_in_scope(store: Store) -> None:
    """A batch of hybrid searches answers each search as a single query would (with the same ranks when explained),
    keeps to the tenant's scope, and an empty batch answers empty."""
    mine, theirs = unique("t"), unique("t")
    await store.upsert([item(mine, ["a"], dense=[1, 0, 0, 0], terms=[1], text="first"),
                        item(mine, ["b"], dense=[0, 1, 0, 0], terms=[2], text="second"),
                        item(theirs, ["a"], dense=[1, 0, 0, 0], terms=[1], text="theirs")])
    scope = Scope(tenant_id=mine)
    searches = [HybridSearch(vectors=query([1, 0, 0, 0], [1]), limit=1),
                HybridSearch(vectors=query([0, 1, 0, 0], [2]), limit=1),
                HybridSearch(vectors=query([1, 0, 0, 0], [1]), limit=5)]
    batch = await store.hybrid_batch(scope, searches)
    assert [[h.entry.text for h in hits] for hits in batch] == [["first"], ["second"], ["first", "second"]]
    single = await store.hybrid_query(scope, query([0, 1, 0, 0], [2]), limit=1)
    assert [h.entry.id for h in single] == [h.entry.id for h in batch[1]]
    explained = await store.hybrid_batch(scope, searches, explain=True)
    one = await store.hybrid_query(scope, query([1, 0, 0, 0], [1]), limit=5, explain=True)
    assert explained[2] == one and explained[0] == one[:1]
    assert [(h.dense_rank, h.sparse_rank) for h in one] == [(1, 1), (2, None)]
    assert await store.hybrid_batch(scope, []) == []


async def test_a_batch_of_reads_answers_each_like_its_own_call_under_its_own_scope(store: Store) -> None:
    """One batch of searches by one vector and reads by time answers each as `search`, `earliest` and `newest`
    would, each under its own scope and filter: a read scoped to another tenant sees only that tenant's entries, one
    scoped to a conversation only that conversation's; an empty batch answers empty."""
    mine, theirs = unique("t"), unique("t")
    await store.upsert([item(mine, ["a"], dense=[1, 0, 0, 0], terms=[1], days=3, text="a"),
                        item(mine, ["b"], dense=[0, 1, 0, 0], terms=[2], days=1, text="b"),
                        item(mine, ["c"], dense=[0, 0, 1, 0], terms=[1, 2], weights=[0.5, 1.0], days=5, text="c",
                             conversation="c2"),
                        item(mine, ["d"], dense=[0.8, 0.6, 0, 0], terms=[1], days=7, text="d", kind="fact"),
                        item(theirs, ["a"], dense=[1, 0, 0, 0], terms=[1], days=0, text="theirs")])
    scope, one = Scope(tenant_id=mine), Scope(tenant_id=mine, conversation_id="c1")
    episodes = EntryFilter(kinds=["episodic"])
    reads = [VectorRead(scope=scope, vectors=query([1, 0, 0, 0], [1]), using="sparse", limit=5, entry_filter=episodes),
             TimeRead(scope=one, limit=5),
             TimeRead(scope=scope, limit=2, newest=True),
             VectorRead(scope=one, vectors=query([1, 0, 0, 0], [2]), using="dense", limit=2),
             TimeRead(scope=Scope(tenant_id=theirs), limit=5),
             TimeRead(scope=scope, limit=5, entry_filter=EntryFilter(since=T0 + timedelta(days=2),
                                                                     until=T0 + timedelta(days=5)))]
    batch = await store.reads(reads)
    assert [[h.entry.text for h in hits] for hits in batch] == [["a", "c"], ["b", "a", "d"], ["d", "c"],
                                                                ["a", "d"], ["theirs"], ["a", "c"]]
    assert [h.entry.id for h in batch[0]] == [h.entry.id for h in await store.search(
        scope, query([1, 0, 0, 0], [1]), using="sparse", limit=5, entry_filter=episodes)]
    assert [round(h.score, 6) for h in batch[0]] == [round(h.score, 6) for h in await store.search(
        scope, query([1, 0, 0, 0], [1]), using="sparse", limit=5, entry_filter=episodes)]
    assert [h.entry for h in batch[1]] == await store.earliest(one, limit=5)
    assert [h.entry for h in batch[2]] == await store.newest(scope, limit=2)
    assert await store.reads([]) == []


async def test_never_recalled_counts_entries_no_recall_has_returned(store: Store) -> None:
    """The never_recalled filter counts only entries whose access count was never raised by a recall."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant)
    items = [item(tenant, [f"t{i}"], dense=[1, 0, 0, 0], terms=[1]) for i in range(3)]
    await store.upsert(items)
    assert await store.count(scope, EntryFilter(never_recalled=True)) == 3
    await store.set_payload(scope, [items[0].entry.id], {"access_count": 1,
                                                         "last_accessed_at": "2026-11-24T08:00:00+00:00"})
    assert await store.count(scope, EntryFilter(never_recalled=True)) == 2
