"""The entries subject's newest-first listing and counts over the real engine: pages cover every entry once, newest
first, never splitting an instant; an instant larger than a page comes whole; a page too big for a reply ends at an
instant's boundary; counts by kind and replaced."""
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engram_client.contract import EntriesRequest, EntriesResponse
from shared.retrieval.entries import entries
from shared.store import EdgeStore, Scope, Store
from tests.support.ids import unique
from tests.support.store import T0, item

DAYS = [4, 4, 4, 4, 4, 2, 7, 7, 1, 0, 9, 3, 3, 6]  # five entries of one instant (day 4)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = EdgeStore.open(tmp_path / "qdrant", 4)
    yield opened
    await opened.close()


async def listing(store: Store, tenant: str, limit: int, max_bytes: int | None = None) -> list[EntriesResponse]:
    pages: list[EntriesResponse] = []
    before, before_id = None, None
    while True:
        request = EntriesRequest.model_validate({"op": "list", "order": "newest", "limit": limit, "before": before,
                                                 "before_id": before_id})
        page = await entries(store, tenant, request, max_bytes)
        pages.append(page)
        if page.next_cursor is None:
            return pages
        before, before_id = page.next_cursor, page.next_cursor_id
        assert len(pages) < 100


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 6, 14, 20])
async def test_newest_first_pages_cover_every_entry_once_without_splitting_an_instant(store: Store,
                                                                                       limit: int) -> None:
    """Whatever the page size, paging newest first returns each entry once, newest first and in id order within an
    instant, never more than a page; the five entries of one instant share a page whenever a page can hold them
    (a smaller page goes through them in id order)."""
    tenant = unique("t")
    await store.upsert([item(tenant, [f"t{i}"], dense=[1, 0, 0, 0], terms=[1], days=d) for i, d in enumerate(DAYS)])
    pages = await listing(store, tenant, limit)
    seen = [e for p in pages for e in p.entries]
    assert len(seen) == len({e.id for e in seen}) == len(DAYS)
    keys = [(-e.occurred_at.timestamp(), e.id) for e in seen]
    assert keys == sorted(keys)
    instant = T0 + timedelta(days=4)
    holding = sum(1 for p in pages if any(e.occurred_at == instant for e in p.entries))
    assert holding == 1 if limit >= 5 else holding >= 5 // limit
    assert all(len(p.entries) <= limit for p in pages)


async def test_a_page_too_big_for_a_reply_ends_at_an_instants_boundary(store: Store) -> None:
    """With a reply limit that holds about three entries, pages end early at an instant's boundary and the listing
    still covers everything once."""
    tenant = unique("t")
    await store.upsert([item(tenant, [f"t{i}"], dense=[1, 0, 0, 0], terms=[1], days=d, text="x" * 400)
                        for i, d in enumerate([5, 5, 3, 2, 2, 1, 0])])
    pages = await listing(store, tenant, 10, max_bytes=2600)
    seen = [e.id for p in pages for e in p.entries]
    assert len(seen) == len(set(seen)) == 7 and len(pages) > 1
    for earlier, later in itertools.pairwise(pages):
        assert earlier.entries[-1].occurred_at > later.entries[0].occurred_at


async def test_an_instant_at_the_first_datetime_and_a_cut_inside_an_instant(store: Store) -> None:
    """Entries stamped at the first instant a datetime holds page without overflowing, and a reply limit that cuts
    inside an instant goes on from the entry it left out."""
    tenant = unique("t")
    first = datetime.min.replace(tzinfo=UTC)
    await store.upsert([item(tenant, [f"t{i}"], dense=[1, 0, 0, 0], terms=[1], text="y" * 400) for i in range(7)])
    for stored in (await store.scroll(Scope(tenant_id=tenant), limit=10)).entries:
        await store.set_payload(Scope(tenant_id=tenant), [stored.id], {"occurred_at": first.isoformat()})
    for limit, max_bytes in ((3, None), (10, 2600)):
        pages = await listing(store, tenant, limit, max_bytes)
        seen = [e.id for p in pages for e in p.entries]
        assert seen == sorted(seen) and len(seen) == len(set(seen)) == 7 and len(pages) >= 3


async def test_counts_by_kind_and_replaced(store: Store) -> None:
    """counts gives each kind's entries in the scope and how many were superseded or merged away."""
    tenant = unique("t")
    await store.upsert([item(tenant, ["a"], dense=[1, 0, 0, 0], terms=[1]),
                        item(tenant, ["b"], dense=[1, 0, 0, 0], terms=[1], merged_into="x"),
                        item(tenant, ["c"], dense=[1, 0, 0, 0], terms=[1], kind="fact", superseded_by="y"),
                        item(tenant, ["d"], dense=[1, 0, 0, 0], terms=[1], kind="fact"),
                        item(tenant, ["e"], dense=[1, 0, 0, 0], terms=[1], user="u2")])
    reply = await entries(store, tenant, EntriesRequest(op="counts", user_id="u1"))
    assert reply.counts == {"episodic": 2, "fact": 2, "replaced": 2}
