"""Qdrant Edge and a forget's bytes on disk: after `erase`, no file of the shard holds a deleted entry's text nor the
old text of an entry written again in its place; a shard made with a write-ahead log (before 0.36) keeps it there.

The scan reads every file of the shard for a unique ASCII token (the same bytes in JSON, CBOR and any lowercased
index), and first finds it, so it is not blind (tests/support/disk.py says why the token is upper-case
consonants).
"""
from pathlib import Path

from shared.store import EdgeStore, Scope, StoredEntry
from tests.support.disk import scan_token
from tests.support.ids import unique
from tests.support.store import item


def holding(folder: Path, token: str) -> list[str]:
    """The files under `folder` whose bytes hold `token`."""
    needle = token.encode()
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes())


def written(tenant: str, n: int, text: str) -> StoredEntry:
    return item(tenant, [f"t{n}"], dense=[1.0, 0.1 * n, 0.0, 0.5], terms=[n], text=text)


async def test_erase_leaves_no_file_holding_a_deleted_or_replaced_text(tmp_path: Path) -> None:
    """Ana's entry is deleted and Bo's episode quoting her is written again without her words, among 200 others
    (written, some rewritten, before): after `erase` no file of the shard (payload pages, indexes, the config, any
    log) holds either token; before it, both were there. The store still answers, and from a reopened shard too."""
    tenant, folder = unique("erase"), tmp_path / "edge"
    gone, quoted = scan_token(), scan_token()
    store = EdgeStore.open(folder, 4)
    try:
        await store.upsert([written(tenant, n, f"ordinary entry {n} " * 10) for n in range(200)])
        await store.set_payload(Scope(tenant_id=tenant), [written(tenant, n, "").entry.id for n in range(0, 200, 7)],
                                {"access_count": 3})
        anas, bos = written(tenant, 200, f"Ana: my code is {gone}"), written(tenant, 201, f"Bo: Ana said {quoted}")
        await store.upsert([anas, bos])
        before = holding(folder, gone), holding(folder, quoted)
        assert all(before), before  # the scan sees them before

        await store.delete(Scope(tenant_id=tenant), [anas.entry.id])
        await store.replace([written(tenant, 201, "Bo: the storage unit is on the second floor")])
        await store.erase()

        assert holding(folder, gone) == [] and holding(folder, quoted) == []
        kept = await store.get(Scope(tenant_id=tenant), [bos.entry.id])
        assert [e.text for e in kept] == ["Bo: the storage unit is on the second floor"]
        assert await store.count(Scope(tenant_id=tenant)) == 201
    finally:
        await store.close()
    reopened = EdgeStore.open(folder, 4)
    try:
        assert await reopened.count(Scope(tenant_id=tenant)) == 201 and not reopened.wal
    finally:
        await reopened.close()


async def test_a_shard_made_with_a_write_ahead_log_keeps_the_text_in_its_log(tmp_path: Path) -> None:
    """A shard made before 0.36 keeps its write-ahead log (the engine cannot drop it): `erase` clears the payload
    pages, while the log still holds the deleted text; engram says so (docs/guarantees.md) and `engram rebuild`
    moves memory into a shard without one."""
    tenant, folder, gone = unique("erase"), tmp_path / "edge", scan_token()
    store = EdgeStore.open(folder, 4, wal=True)
    try:
        await store.upsert([written(tenant, n, f"ordinary entry {n}") for n in range(20)] +
                           [written(tenant, 20, f"Ana: my code is {gone}")])
        await store.delete(Scope(tenant_id=tenant), [written(tenant, 20, "").entry.id])
        await store.erase()
        left = holding(folder, gone)
        assert left and all(name.startswith("wal/") for name in left), left
    finally:
        await store.close()
    reopened = EdgeStore.open(folder, 4)
    try:
        assert reopened.wal  # reopened, it is still a shard with a log
    finally:
        await reopened.close()
