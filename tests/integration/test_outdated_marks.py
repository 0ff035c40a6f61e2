"""The outdated marks against the real store: what they depend on, and what they must not."""
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from shared.compress.facts.render import without_stated
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
    """An entry of user u1 in its own conversation (the source's, and every fact's, is c-source with turn s), `days`
    after T0, with BM25 terms."""
    read = name == "source" or name.startswith("fact")
    conversation = "c-source" if read else f"c-{name}"
    when = T0 + timedelta(days=days)
    entry = MemoryEntry(id=entry_id(tenant, conversation, [name]), tenant_id=tenant, user_id="u1",
                        conversation_id=conversation, kind=kind, text=text, occurred_at=when,  # type: ignore[arg-type]
                        created_at=when, updated_at=when,
                        source_turn_ids=["s"] if read else [name], **payload)  # type: ignore[arg-type]
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


async def test_an_episode_naming_the_value_outdates_the_fact_and_the_rules_restatement_keeps_it(
        store: EdgeStore) -> None:
    """A later window that names the value ("Kasimir and I ended it... Leopoldine and I are seeing each other
    again") is evidence about the same thing, not a restatement: it outdates the fact. The same window read by the
    rules as the slot's newest statement (its turn among the fact's own, the fact dated from it) keeps it current."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant, user_id="u1")
    fact = stored(tenant, "fact", "Benedikt is seeing Kasimir (stated 17 December 2022)", [1, 0, 0, 0], 0,
                  kind="fact", attribute="partner", value="Kasimir", slot_key="bpartner")
    ended = stored(tenant, "ended", "Benedikt: Kasimir and I ended it in may. and Leopoldine and I are seeing "
                                    "each other again", [0.9, 0.1, 0, 0], 190)
    await store.upsert([stored(tenant, "source", "Benedikt: I've been seeing Kasimir", [1, 0, 0, 0], 0),
                        stored(tenant, "talk", "Benedikt: recipe for goulash please", [0, 1, 0, 0], 100),
                        ended, fact])

    async def marks(said: MemoryEntry) -> list[object]:
        items = [outdated.Item(said, list(fact.vectors.dense))]
        return [c.payload.get("outdated_by") for c in await outdated.changes(store, scope, items, BM25, band=0.4,
                                                                             rrf_k=3)]

    assert await marks(fact.entry) == [ended.entry.id]
    restated = fact.entry.model_copy(update={"conversation_id": "c-ended", "source_turn_ids": ["ended", "s"],
                                             "occurred_at": ended.entry.occurred_at})
    assert await marks(restated) == []


async def test_a_relative_an_origin_a_birthday_or_an_allergy_is_never_marked_outdated(
        store: EdgeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A newer episode about Henrik's sister, origin, birthday and allergy, naming none of their values, would
    outdate each of those facts as it does where he lives; lasting kinds (a relative by name, an origin, a birthday,
    an allergy, a statement the model put in such a slot) are never marked, and one marked by an earlier run is
    unmarked. A partner the model filed as family is no relative by blood: it is marked like where he lives."""
    tenant = unique("t")
    scope = Scope(tenant_id=tenant, user_id="u1")
    news = stored(tenant, "news", "Henrik: my sister has news, you asked where I grew up, my birthday party is off, "
                                  "my allergy flared at dinner again, my wife too, and I live somewhere else now",
                  [0.9, 0.1, 0, 0], 200)
    said = [("Henrik lives in Tromso", {"attribute": "lives_in", "value": "Tromso"}),
            ("Henrik's sister is Ingrid", {"attribute": "family:sister:ingrid", "value": "Ingrid",
                                           "outdated_by": news.entry.id}),
            ("Henrik is from Bodo", {"attribute": "from", "value": "Bodo"}),
            ("Henrik's birthday is 2 May", {"attribute": "birthday", "value": "2 May"}),
            ("Henrik is allergic to shellfish", {"attribute": "allergy:shellfish", "value": "allergic"}),
            ("Henrik said his sister Ingrid works nights", {"slot_key": "henrik\x1ffamily:sister:ingrid",
                                                            "slot_by_model": True}),
            ("Henrik's wife is Solveig", {"attribute": "family:wife:solveig", "value": "Solveig"})]
    facts = [stored(tenant, f"fact{i}", f"{text} (stated 3 December 2022)", [1, 0, 0, 0], 0, kind="fact", **payload)
             for i, (text, payload) in enumerate(said)]
    await store.upsert([stored(tenant, "source", "Henrik: I live in Tromso, my sister Ingrid, Bodo, 2 May, shellfish, "
                                                 "my wife Solveig", [1, 0, 0, 0], 0),
                        stored(tenant, "talk", "Henrik: recipe for goulash please", [0, 1, 0, 0], -100), news])
    items = [outdated.Item(f.entry, list(f.vectors.dense)) for f in facts]

    async def marks() -> dict[str, object]:
        marked = {f.entry.text: f.entry.outdated_by for f in facts}
        for change in await outdated.changes(store, scope, items, BM25, band=0.4, rrf_k=3):
            marked[change.entry.text] = change.payload["outdated_by"]
        return {without_stated(text): by for text, by in marked.items()}

    with monkeypatch.context() as unlasting:  # the control: every fact is about what the news talks of
        unlasting.setattr(outdated, "LASTING", frozenset())
        assert await marks() == {text: news.entry.id for text, _ in said}
    assert await marks() == {text: news.entry.id if text.endswith(("Tromso", "Solveig")) else None
                             for text, _ in said}
