"""Builds of the long-term memory: where the live one is, a fresh one for `engram rebuild`, and the atomic switch.

On a Qdrant server, ENGRAM_COLLECTION names an alias; each build is a collection of its own, and the switch moves the
alias in one request, so every replica reads and writes the new build from its next call. On Qdrant Edge (one
process), each build is a folder; a pointer file names the live one, and the switch repoints it and hands the new
shard to the running store.

A replaced build is kept for a rollback (a switch back, by hand) until the next forget, which deletes it: a
rollback would otherwise bring the forgotten person back. The switch marks it retired (a RETIRED file in an Edge
folder, `engram_retired_at` in a server collection's metadata); a forget deletes what is so marked (an Edge shard
this process still reads, during a rebuild's carry-over, is marked DOOMED instead and deleted once let go), and a
live pointer naming a deleted or doomed build is refused at start.
"""
import asyncio
import logging
import math
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from engram_client.errors import Unavailable
from shared.errors import ConfigError
from shared.messaging.security import qdrant_options
from shared.settings import Settings
from shared.store.edge import EdgeStore
from shared.store.protocol import Store
from shared.text import patterns

if TYPE_CHECKING:  # loaded by the server paths only (see shared/store/__init__.py)
    from qdrant_client import AsyncQdrantClient

log = logging.getLogger("engram.builds")
BUILD_NAME = patterns.compile(r"^[A-Za-z0-9_-]{1,64}$")
FIRST_BUILD = "initial"
RETIRED = "RETIRED"  # in an Edge build's folder: replaced by a switch, kept for a rollback until the next forget
DOOMED = "DOOMED"    # in a retired Edge build's folder a forget found open: deleted once let go, never live again
RETIRED_KEY = "engram_retired_at"  # in a server collection's metadata: as RETIRED


def _edge_root(settings: Settings) -> Path:
    return Path(settings.qdrant_path)


def _pointer(settings: Settings) -> Path:
    """The file naming the live Edge build (absent: the first build, in data_dir/qdrant itself)."""
    return _edge_root(settings).with_name("qdrant.live")


def edge_builds(settings: Settings) -> Path:
    """The folder holding every Edge build made by `engram rebuild`."""
    return _edge_root(settings).with_name("qdrant-builds")


def live_edge_path(settings: Settings) -> Path:
    """The folder of the live Edge build.

    Raises:
        ConfigError: the pointer names no build folder (starting on another build, or an empty one, would serve
            the wrong memory).
    """
    pointer = _pointer(settings)
    if not pointer.exists():
        root = _edge_root(settings)
        if not root.exists() and edge_builds(settings).is_dir() and any(edge_builds(settings).iterdir()):
            raise ConfigError(f"{pointer} is missing and the first build ({root}) was deleted by a forget after a "
                              "rebuild replaced it: a rollback across a forget is refused; write the name of the "
                              f"live build (a folder of {edge_builds(settings)}) into {pointer}")
        return root
    name = pointer.read_text().strip()
    folder = edge_builds(settings) / name
    if not BUILD_NAME.match(name) or not folder.is_dir() or (folder / DOOMED).exists():
        raise ConfigError(f"{pointer} names build {name!r}, which is not a folder of {edge_builds(settings)} (a "
                          "build replaced by a rebuild is deleted by the next forget: a rollback across a forget "
                          "is refused); restore it or write the name of the live build into it")
    return folder


def _edge_folders(settings: Settings) -> list[Path]:
    """Every Edge build folder: the first one (data_dir/qdrant) and those `engram rebuild` made."""
    builds = edge_builds(settings)
    return [_edge_root(settings), *(sorted(p for p in builds.iterdir() if p.is_dir()) if builds.is_dir() else [])]


def physical(settings: Settings, name: str) -> str:
    """The collection a build lives in on a Qdrant server."""
    return f"{settings.collection}-{name}"


def server_client(settings: Settings) -> "AsyncQdrantClient":
    """A client of the Qdrant server at ENGRAM_QDRANT_URL; a request it gets no answer to within
    ENGRAM_QDRANT_TIMEOUT_S fails (as `unavailable` through ClientStore) instead of waiting for ever."""
    from qdrant_client import AsyncQdrantClient

    return AsyncQdrantClient(url=settings.qdrant_url, timeout=math.ceil(settings.qdrant_timeout_s),
                             **qdrant_options(settings))


async def _aliases(client: "AsyncQdrantClient") -> dict[str, str]:
    """Every alias of the server, with the collection it points at."""
    return {a.alias_name: a.collection_name for a in (await client.get_aliases()).aliases}


async def _live_collection(settings: Settings, client: "AsyncQdrantClient") -> str:
    """The collection the ENGRAM_COLLECTION alias points at.

    Raises:
        ConfigError: ENGRAM_COLLECTION is a collection, not an alias (it cannot be switched atomically).
    """
    aliases = await _aliases(client)
    if settings.collection not in aliases:
        raise ConfigError(f"collection {settings.collection!r} is not an alias, so a rebuild cannot switch to a new "
                          "build atomically; see the README's upgrade notes")
    return aliases[settings.collection]


async def open_live(settings: Settings, dense_dim: int) -> Store:
    """The store recall reads and the ingestor writes: the alias on a server (made on first use, pointing at the
    first build), the live folder on Edge (a build rolled back to, before any forget, is live again: no longer
    retired)."""
    if not settings.qdrant_url:
        folder = live_edge_path(settings)
        (folder / RETIRED).unlink(missing_ok=True)
        for other in _edge_folders(settings):
            if (other / DOOMED).exists() and other != folder:
                shutil.rmtree(other, ignore_errors=True)  # a forget doomed it while a rebuild still read it
        return EdgeStore.open(folder, dense_dim)
    from qdrant_client import models as qm

    from shared.store.remote import ClientStore

    client = server_client(settings)
    try:
        aliases = await _aliases(client)
        legacy = settings.collection not in aliases and await client.collection_exists(settings.collection)
    except Exception as exc:
        raise Unavailable(f"Qdrant at {settings.qdrant_url} is unreachable: {exc}") from exc
    if settings.collection not in aliases and not legacy:
        first = physical(settings, FIRST_BUILD)
        await ClientStore.open(client, first, dense_dim)
        await client.update_collection_aliases(change_aliases_operations=[qm.CreateAliasOperation(
            create_alias=qm.CreateAlias(collection_name=first, alias_name=settings.collection))])
    return await ClientStore.open(client, settings.collection, dense_dim)


async def open_build(settings: Settings, name: str, dense_dim: int) -> Store:
    """A new, empty build named `name` (nothing of that name may exist yet).

    Raises:
        ConfigError: a bad or taken name, or a server collection that is not behind an alias (it cannot be
            switched atomically).
    """
    if not BUILD_NAME.match(name):
        raise ConfigError(f"build name {name!r} must be 1-64 letters, digits, '_' or '-'")
    if not settings.qdrant_url:
        folder = edge_builds(settings) / name
        if folder.exists():
            raise ConfigError(f"a build named {name!r} already exists in {folder}; choose another name")
        return EdgeStore.open(folder, dense_dim)
    from shared.store.remote import ClientStore

    client = server_client(settings)
    await _live_collection(settings, client)
    target = physical(settings, name)
    if await client.collection_exists(target):
        raise ConfigError(f"collection {target!r} already exists; choose another build name or delete it")
    return await ClientStore.open(client, target, dense_dim)


async def switch(settings: Settings, live: Store, name: str, built: Store) -> str | None:
    """Make build `name` the live one, atomically; returns the build it replaced (a collection or folder name, kept
    for a rollback and deleted by hand), if known."""
    if settings.qdrant_url:
        from qdrant_client import models as qm

        from shared.store.remote import ClientStore

        if not isinstance(built, ClientStore):
            raise ConfigError("a server build can only be a collection of that server")
        client = built.client  # the build's own connection: no other to open (and close) for one request
        before = (await _aliases(client)).get(settings.collection)
        await client.update_collection_aliases(change_aliases_operations=[
            qm.DeleteAliasOperation(delete_alias=qm.DeleteAlias(alias_name=settings.collection)),
            qm.CreateAliasOperation(create_alias=qm.CreateAlias(collection_name=physical(settings, name),
                                                                alias_name=settings.collection))])
        if before is not None:
            await client.update_collection(before, metadata={RETIRED_KEY: datetime.now(UTC).isoformat()})
        return before
    if not isinstance(live, EdgeStore) or not isinstance(built, EdgeStore):
        raise ConfigError("an Edge build can only replace a running Edge store")
    previous = live_edge_path(settings)
    pointer = _pointer(settings)
    temporary = pointer.with_suffix(".tmp")
    with temporary.open("w") as out:
        out.write(name + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, pointer)  # a restart opens the new build (complete by now) ...
    await live.adopt(built)  # ... and from here on every call of this process goes to it
    (previous / RETIRED).write_text(datetime.now(UTC).isoformat() + "\n")
    return str(previous)


async def drop_retired(settings: Settings, live: Store) -> list[str]:
    """Delete every build a switch replaced (a forget's last step: a rollback to one would bring the forgotten
    back); the names of those deleted or, on Edge, doomed (still read by this process: deleted when let go)."""
    if settings.qdrant_url:
        client = server_client(settings)
        try:
            serving = await _live_collection(settings, client)
            dropped = []
            for described in (await client.get_collections()).collections:
                name = described.name
                if name == serving or not name.startswith(f"{settings.collection}-"):
                    continue
                metadata = (await client.get_collection(name)).config.metadata or {}
                if RETIRED_KEY in metadata:
                    await client.delete_collection(name)
                    dropped.append(name)
            return dropped
        finally:
            await client.close()
    if not isinstance(live, EdgeStore):
        return []
    live_folder, still_read = live_edge_path(settings), set(live.retired_paths)
    dropped = []
    for folder in _edge_folders(settings):
        if folder == live_folder or not (folder / RETIRED).exists():
            continue
        if folder in still_read:
            (folder / DOOMED).write_text(datetime.now(UTC).isoformat() + "\n")
        else:
            await asyncio.to_thread(shutil.rmtree, folder)
        dropped.append(folder.name)
    if dropped:
        log.info("a forget deleted the retired builds %s (a rollback to them is refused from now on)", dropped)
    return dropped


async def discard(settings: Settings, name: str, built: Store) -> None:
    """Remove a build that failed half way (never the live one), so its name can be used again."""
    await built.close()
    if settings.qdrant_url:
        client = server_client(settings)
        try:
            await client.delete_collection(physical(settings, name))
        finally:
            await client.close()
        return
    folder = edge_builds(settings) / name
    pointer = _pointer(settings)
    if not (pointer.exists() and pointer.read_text().strip() == name):  # never the live one
        shutil.rmtree(folder, ignore_errors=True)


async def retire(settings: Settings, live: Store) -> None:
    """Let go of what a switch replaced in this process (the old Edge shard; nothing on a server), deleting it if
    a forget doomed it meanwhile."""
    if isinstance(live, EdgeStore):
        let_go = live.retired_paths
        await live.close_retired()
        for folder in let_go:
            if (folder / DOOMED).exists():
                await asyncio.to_thread(shutil.rmtree, folder, True)


async def current(settings: Settings, live: Store) -> Store:
    """The build `live` serves now, addressed directly (not through the alias, nor through a store that a switch
    repoints): where a rebuild finds what to carry over, before and after its switch. Never close it on Edge
    (it shares the live shard, which the running store closes)."""
    if not settings.qdrant_url:
        if not isinstance(live, EdgeStore):
            raise ConfigError("a rebuild on Qdrant Edge needs the running Edge store")
        return live.view()
    from shared.store.remote import ClientStore

    client = server_client(settings)
    return ClientStore(client, await _live_collection(settings, client))
