"""The outdated marks against the real store: what they depend on, and what they must not."""
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from shared.consolidation import outdated
from shared.embedding import Bm25Encoder
from shared.store import EdgeStore, MemoryEntry, Scope, StoredEntry, Vectors, entry_id
from tests.support.ids import unique
from tests.support.store import T0

BM25 = Bm25Encoder("english")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EdgeStore]:
    opened = EdgeStore.open(tmp_path / "qdrant", 4)
    yield opened
    await opened.close()


def stored(tenant: str, name: str, text: str, dense: list[float], days: int, kind: str = "episodic",
           **payload: object) -> StoredEntry:
    """An entry of user u1 in its own conversation (the source's is c-source), `days` after T0, with BM25 terms."""
    conversation = "c-source" if name in ("fact", "source") else f"c-{name}"
    when = T0 + timedelta(days=days)
    entry = MemoryEntry(id=entry_id(tenant, conversation, [name]), tenant_id=tenant, user_id="u1",
                        conversation_id=conversation, kind=kind, text=text, occurred_at=when,  # type: ignore[arg-type]
                        created_at=when, updated_at=when,
                        source_turn_ids=["s"] if name in ("fact", "source") else [name], **payload)  # type: ignore[arg-type]
    return StoredEntry(entry=entry, vectors=Vectors(dense=dense, sparse=BM25.document(text, "english")))


async def test_the_marks_count_idf_over_the_episodes_only(store: EdgeStore) -> None:
    """Facts and profiles that repeat a word of the fact (as a profile repeats its facts) leave the marks as they
    were: the newer episode that shares the rarer word with the fact outdates it before and after."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant, user_id="u1")
    fact = stored(tenant, "fact", "Lena lives in Vienna (stated 8 May 2023)", [1, 0, 0, 0], 0, kind="fact",
                  value="Vienna")
    # Dense ranks: source, moved, small talk. In BM25 "moved" and "small talk" tie (one query word each, and the
    # two words are equally common among the episodes): they share the better rank, and "moved" is in the band.
    await store.upsert([stored(tenant, "source", "Lena lives in Vienna", [1, 0, 0, 0], 0),
                        stored(tenant, "moved", "lives bought paint", [0.8, 0.6, 0, 0], 100),
                        stored(tenant, "talk", "Lena bought paint", [0.6, 0.8, 0, 0], 120), fact])
    items = [outdated.Item(fact.entry, list(fact.vectors.dense))]

    async def marks() -> list[object]:
        return [c.payload.get("outdated_by") for c in await outdated.changes(store, scope, items, BM25, band=0.3,
                                                                             rrf_k=3)]

    before = await marks()
    assert before == [entry_id(tenant, "c-moved", ["moved"])]
    # Thirty derived claims that say "lives" make it a common word of the scope, not of the episodes.
    await store.upsert([stored(tenant, f"claim{i}", f"Ana lives here {i}", [0, 0, 0, 1], 130, kind="fact")
                        for i in range(30)])
    assert await marks() == before


async def test_a_change_between_two_values_of_a_slot_outdates_the_newer_fact(store: EdgeStore) -> None:
    """The partner slot held Leopoldine (superseded) and holds Kasimir. A later episode that names both ("Kasimir
    and I ended it... Leopoldine and I are seeing each other again") outdates the Kasimir fact once the job is given
    the slot's history; without it, the episode reads as a repeat of Kasimir and keeps the fact current."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant, user_id="u1")
    old = stored(tenant, "old", "Benedikt's girlfriend is Leopoldine (stated 7 May 2022)", [0, 0, 1, 0], -200,
                 kind="fact", attribute="partner", value="Leopoldine", slot_key="bpartner", superseded_by="x")
    fact = stored(tenant, "fact", "Benedikt is seeing Kasimir (stated 17 December 2022)", [1, 0, 0, 0], 0,
                  kind="fact", attribute="partner", value="Kasimir", slot_key="bpartner")
    ended = stored(tenant, "ended", "Benedikt: Kasimir and I ended it in may. and Leopoldine and I are seeing "
                                    "each other again", [0.9, 0.1, 0, 0], 190)
    await store.upsert([stored(tenant, "source", "Benedikt: I've been seeing Kasimir", [1, 0, 0, 0], 0),
                        stored(tenant, "talk", "Benedikt: recipe for goulash please", [0, 1, 0, 0], 100),
                        ended, old, fact])
    items = [outdated.Item(fact.entry, list(fact.vectors.dense))]

    async def marks(history: list[MemoryEntry]) -> list[object]:
        return [c.payload.get("outdated_by") for c in await outdated.changes(store, scope, items, BM25, band=0.4,
                                                                             rrf_k=3, history=history)]

    assert await marks([]) == []
    assert await marks([old.entry, fact.entry]) == [ended.entry.id]


async def test_a_relative_an_origin_a_birthday_or_an_allergy_is_never_marked_outdated(store: EdgeStore) -> None:
    """A newer episode about the sister ("Ingrid moved to Alesund") outdates where Henrik lives by the same test, but
    not that Ingrid is his sister, nor where he is from, his birthday or his allergy, nor a statement the model put
    in such a slot; a lasting fact marked by an earlier run is unmarked."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant, user_id="u1")
    news = stored(tenant, "news", "Henrik: my sister Ingrid moved to Alesund, I am from Bodo, my birthday is in May, "
                                  "still allergic to shellfish, and I live somewhere else now", [0.9, 0.1, 0, 0], 200)
    facts = [stored(tenant, "fact", text, [1, 0, 0, 0], 0, kind="fact", **payload) for text, payload in [
        ("Henrik lives in Tromso (stated 3 December 2022)", {"attribute": "lives_in", "value": "Tromso"}),
        ("Henrik's sister is Ingrid (stated 3 December 2022)", {"attribute": "family:sister:ingrid", "value": "Ingrid",
                                                               "outdated_by": news.entry.id}),
        ("Henrik is from Bodo (stated 3 December 2022)", {"attribute": "from", "value": "Bodo"}),
        ("Henrik's birthday is 2 May (stated 3 December 2022)", {"attribute": "birthday", "value": "2 May"}),
        ("Henrik is allergic to shellfish (stated 3 December 2022)", {"attribute": "allergy:shellfish",
                                                                     "value": "allergic"}),
        ("Henrik said his sister Ingrid works nights", {"slot_key": "henrik\x1ffamily:sister:ingrid",
                                                        "slot_by_model": True})]]
    await store.upsert([stored(tenant, "source", "Henrik: I live in Tromso, my sister Ingrid, Bodo, May, shellfish",
                               [1, 0, 0, 0], 0),
                        stored(tenant, "talk", "Henrik: recipe for goulash please", [0, 1, 0, 0], 100), news])
    items = [outdated.Item(f.entry, list(f.vectors.dense)) for f in facts]
    changes = {c.entry.text: c.payload["outdated_by"] for c in await outdated.changes(store, scope, items, BM25,
                                                                                      band=0.4, rrf_k=3)}
    assert changes == {facts[0].entry.text: news.entry.id, facts[1].entry.text: None}
