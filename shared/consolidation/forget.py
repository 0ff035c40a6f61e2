"""Forget: erase everything engram holds of a user, a conversation or a list of entries, and prove it.

The one hard delete in engram (supersede and merge keep history). In this order, so that nothing flows back:

1. the turns still queued in the stream (not yet ingested) and the dead letters about the subject, securely
   erased by sequence;
2. working memory: a conversation's buffer, texts and open-index mark; for a user, their turns are taken out of
   every conversation's windows and recent turns (another person's turns in the same conversation stay and are
   written as usual);
3. stored entries of every kind (superseded and merged-away included), announced as `entries_forgotten` first;
   for a user, also their words in entries other people own and the facts stated about them (words.py): an episode
   is written again without their turns, anything else deleted. What the user's words were is learnt first, from
   their turns in the stream, the dead letters and working memory, before step 1 erases them.

Before step 1 it leaves a forget mark (shared/working_memory/forgotten.py): an ingestor drops a turn of the subject it
fetched before the forget, and a closer deletes the entries of the subject it was writing at that moment. Then a
check counts what is left in each place and runs a recall and an entries listing scoped to the subject, and for a
user searches every entry of the tenant for their words (words.py); the pass is repeated (a bounded number of times)
until the check finds nothing. The receipt says what each pass deleted and rewrote and what the last check found.

Last, the disk: the store vacuums what the passes deleted or rewrote (`Store.erase`), and the builds a rebuild
replaced are deleted (shared/store/builds.py), so that no rollback brings the subject back. Working memory and the
streams erase by sequence as they go (no purge leaves a text in a block file).
"""
import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nats.js import JetStreamContext

from engram_client import subjects
from engram_client.contract import (
    DeletedCounts,
    EntriesForgotten,
    Forget,
    ForgetResult,
    Turn,
    check_tenant,
    event_id,
)
from shared.consolidation import merge
from shared.consolidation.changes import applier
from shared.consolidation.profile import profile_id
from shared.consolidation.rewrite import Rederive
from shared.consolidation.words import Traces, learn, take_out
from shared.messaging import streams
from shared.messaging.connection import transient
from shared.messaging.events import Publish
from shared.messaging.streams import TurnsStream
from shared.store import EntryFilter, MemoryEntry, Scope, Store, all_entries
from shared.store.model import SparseVector, Vectors
from shared.working_memory import WorkingMemory

PASSES = 3              # delete-and-check passes before the receipt reports what is left
RECHECK_WAIT_S = 0.5    # between passes: time for a window caught mid-write to land
EVENT_IDS = 1_000       # entry ids per entries_forgotten event



@dataclass(frozen=True)
class Places:
    """Everywhere a tenant's data lives, as the consolidator opened it."""

    store: Store
    working_memory: WorkingMemory
    js: JetStreamContext
    prefix: str
    publish: Publish
    dim: int  # of the dense vectors, for the recall check
    rederive: Rederive | None = None  # writes episodes again without a forgotten user's turns; None: deletes them
    retired: Callable[[], Awaitable[list[str]]] | None = None  # deletes the builds a rebuild replaced


async def forget(places: Places, tenant: str, request: Forget) -> ForgetResult:
    """Delete the subject of `request` everywhere, then check that nothing of it is left (see the module doc)."""
    check_tenant(request, tenant)
    stream = await streams.holding(places.js, places.prefix, tenant)
    if request.entry_ids is None:  # first, so that a turn or window in flight cannot bring the subject back
        last_seq = 0
        if stream is not None:
            with transient("reading the turns stream's last sequence"):
                last_seq = (await places.js.stream_info(stream.name)).state.last_seq
        await places.working_memory.forgotten.mark(tenant, through_seq=last_seq, user_id=request.user_id,
                                                   conversation_id=request.conversation_id)
    deleted = DeletedCounts()
    remaining = DeletedCounts()
    words = _Words(Traces(request.user_id)) if request.user_id is not None else None
    for attempt in range(PASSES):
        if attempt:
            await asyncio.sleep(RECHECK_WAIT_S)
        if words is not None:  # before the turns are erased: afterwards nothing says what they were
            held = await _held_of_user(places.working_memory, tenant, words.traces.user_id)
            await learn(words.traces, places.js, places.prefix, tenant, stream.name if stream else None,
                        [turn for turns in held.values() for turn in turns.values()])
        deleted = _add(deleted, await _delete(places, tenant, request, stream, words))
        remaining = await _remaining(places, tenant, request, stream, words)
        if remaining == DeletedCounts():
            break
    await places.store.erase()  # what the passes deleted or rewrote leaves the store's files
    if places.retired is not None:
        await places.retired()
    return ForgetResult(deleted=deleted, remaining=remaining, verified=remaining == DeletedCounts())


@dataclass
class _Words:
    """A user forget's knowledge of their words, and the entries it wrote again without them (kept across passes)."""

    traces: Traces
    cleared: set[str] = field(default_factory=set)


async def _delete(places: Places, tenant: str, request: Forget, stream: TurnsStream | None,
                  words: "_Words | None") -> DeletedCounts:
    queued = dead = buffers = texts = 0
    if request.entry_ids is not None and stream is not None:
        # Their turns go from the stream too, so no rebuild derives them again.
        sources = {(e.conversation_id, t) for e in await places.store.get(Scope(tenant_id=tenant),
                                                                           list(request.entry_ids))
                   for t in e.source_turn_ids}
        if sources:
            queued += await streams.delete_matching(places.js, stream.name, subjects.turns(places.prefix, tenant),
                                                    turns_among(sources))
    if request.entry_ids is None:
        match = about(request)
        for subject in (subjects.turns(places.prefix, tenant), subjects.flush(places.prefix, tenant)):
            if stream is not None:
                queued += await streams.delete_matching(places.js, stream.name, subject, match)
        dead = await streams.delete_matching(places.js, streams.dlq_stream(places.prefix),
                                             subjects.dlq(places.prefix, tenant), match)
        buffers, texts = await _forget_working_memory(places.working_memory, tenant, request)
    entries, rewritten = await _forget_entries(places, tenant, request, stream, words)
    return DeletedCounts(entries=entries, rewritten=rewritten, working_memory=buffers, turns=texts,
                         queued_turns=queued, dead_letters=dead)


def about(request: Forget) -> Callable[[bytes], bool]:
    """Whether a queued or dead-lettered message is about the subject (a turn of the user; any message of the
    conversation, flushes included). Messages that are not JSON objects name nobody."""

    def match(data: bytes) -> bool:
        try:
            message = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to be a turn
            return False
        if not isinstance(message, dict):
            return False
        if request.user_id is not None:
            return bool(message.get("user_id") == request.user_id)
        return bool(message.get("conversation_id") == request.conversation_id)

    return match


def turns_among(sources: set[tuple[str, str]]) -> Callable[[bytes], bool]:
    """Whether a stream message is one of these (conversation, turn id) turns."""

    def match(data: bytes) -> bool:
        try:
            message = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to be a turn
            return False
        return isinstance(message, dict) and (message.get("conversation_id"), message.get("turn_id")) in sources

    return match


async def _forget_working_memory(wm: WorkingMemory, tenant: str, request: Forget) -> tuple[int, int]:
    """(conversations changed, turn texts deleted)."""
    if request.conversation_id is not None:
        await wm.forget_summaries(tenant, conversation_id=request.conversation_id)
        return await wm.forget_conversation(tenant, request.conversation_id)
    if request.user_id is not None:
        await wm.forget_summaries(tenant, user_id=request.user_id)
    changed = texts = 0
    for conversation_id, turns in (await _held_of_user(wm, tenant, request.user_id)).items():
        await wm.forget_turns_of(tenant, conversation_id, set(turns))
        changed, texts = changed + 1, texts + len(turns)
    return changed, texts


async def _held_of_user(wm: WorkingMemory, tenant: str, user_id: str | None) -> dict[str, dict[int, Turn]]:
    """The user's turns held in working memory, by conversation and sequence."""
    held = await wm.held_turns(tenant)
    found = {c: {seq: turn for seq, turn in turns.items() if turn.user_id == user_id} for c, turns in held.items()}
    return {c: turns for c, turns in found.items() if turns}


def _scope(tenant: str, request: Forget) -> Scope:
    return Scope(tenant_id=tenant, user_id=request.user_id, conversation_id=request.conversation_id)


async def _forget_entries(places: Places, tenant: str, request: Forget, stream: TurnsStream | None,
                          words: _Words | None) -> tuple[int, int]:
    """(entries deleted, entries written again without the user's words)."""
    scope = _scope(tenant, request)
    if request.entry_ids is not None:
        found = await places.store.get(scope, list(request.entry_ids))
    else:  # listed first, so that the event can name them
        found = await all_entries(places.store, scope)
    ids = [e.id for e in found]
    touched = list(found)  # whose profiles and merges change
    rewritten: list[str] = []
    if words is not None:
        others = await _others(places.store, tenant, words.traces)
        outcome = await take_out(places.store, places.js, places.prefix, tenant, stream.name if stream else None,
                                 words.traces, others, places.rederive, words.cleared)
        ids += [i for i in outcome.deleted if i not in ids]
        rewritten = outcome.rewritten
        changed = set(outcome.deleted) | set(rewritten)
        touched += [e for e in others if e.id in changed]
    # A profile gathers facts of its user from every conversation: one built from what goes now goes with it
    # (the next consolidation builds it again from what is left).
    users = sorted({e.user_id for e in touched if e.user_id is not None and e.kind != "profile"})
    profiles = await places.store.get(Scope(tenant_id=tenant), [profile_id(tenant, u) for u in users])
    ids += [p.id for p in profiles if p.id not in ids]
    # A user's own merges stay within the user (all of them go); other people's change with what went or was written
    # again.
    await _mend_merges(places, tenant, [e for e in touched if e.user_id != request.user_id or e.user_id is None],
                       set(ids), set(rewritten))
    await erase(places.store, places.publish, Scope(tenant_id=tenant), ids, "forget request")
    return len(ids), len(rewritten)


async def _others(store: Store, tenant: str, traces: Traces) -> list[MemoryEntry]:
    """Every entry of the tenant not filed under the user (of every kind, history included); learns the names the
    user spoke under from the entries that recorded them."""
    everything = await all_entries(store, Scope(tenant_id=tenant))
    for entry in everything:
        traces.add_entry(entry)
    return [e for e in everything if e.user_id != traces.user_id]


async def _mend_merges(places: Places, tenant: str, found: list[MemoryEntry], erased: set[str],
                       rewritten: set[str]) -> None:
    """Before erasing: take the erased episodes out of the merges of their owners' episodes that stay, and rebuild
    the unions of keepers whose members were written again (a keeper loses their turns, persons and keywords; an
    episode hidden behind an erased keeper is visible again). Done first, so that a forget asked again after a
    failure still finds what to mend."""
    owners = {Scope(tenant_id=tenant, user_id=e.user_id) if e.user_id is not None
              else Scope(tenant_id=tenant, conversation_id=e.conversation_id)
              for e in found if e.kind == "episodic" and (e.merged_into or e.merged_from)}
    episodes = EntryFilter(kinds=["episodic"], include_merged=True, include_superseded=True)
    apply = applier(places.store, places.publish, datetime.now(UTC))
    for owner in sorted(owners, key=lambda o: (o.user_id or "", o.conversation_id or "")):
        await apply(tenant, merge.mended(await all_entries(places.store, owner, episodes), erased,
                                        frozenset(rewritten)))


async def erase(store: Store, publish: Publish, scope: Scope, ids: list[str], reason: str) -> None:
    """Delete entries by id, each chunk announced as `entries_forgotten` first (at least once, stable id)."""
    tenant = scope.tenant_id
    emitted = datetime.now(UTC)
    for start in range(0, len(ids), EVENT_IDS):
        chunk = ids[start:start + EVENT_IDS]
        # Announced before the delete: a retried Forget announces the same ids with the same event id.
        await publish(tenant, EntriesForgotten(
            event_id=event_id("entries_forgotten", tenant, *chunk), tenant_id=tenant, emitted_at=emitted,
            entry_ids=chunk, count=len(chunk), reason=reason))
        await store.delete(scope, chunk)


async def _remaining(places: Places, tenant: str, request: Forget, stream: TurnsStream | None,
                     words: _Words | None) -> DeletedCounts:
    """What a check finds of the subject now, in every place (all zero when forgetting is complete)."""
    scope = _scope(tenant, request)
    if request.entry_ids is not None:
        return DeletedCounts(entries=len(await places.store.get(scope, list(request.entry_ids))))
    listed = await places.store.count(scope)
    probe = Vectors(dense=[1.0] + [0.0] * (places.dim - 1), sparse=SparseVector(indices=[], values=[]))
    recalled = await places.store.search(scope, probe, using="dense", limit=1)  # any vector finds what is there
    match = about(request)
    queued = 0 if stream is None else sum(
        [len(await streams.matching(places.js, stream.name, subject, match))
         for subject in (subjects.turns(places.prefix, tenant), subjects.flush(places.prefix, tenant))])
    dead = len(await streams.matching(places.js, streams.dlq_stream(places.prefix),
                                      subjects.dlq(places.prefix, tenant), match))
    if request.conversation_id is not None:
        wm = places.working_memory
        buffers = int(await wm.get(tenant, request.conversation_id) is not None)
        texts = await wm.text_count(tenant, request.conversation_id)
    else:
        held = await _held_of_user(places.working_memory, tenant, request.user_id)
        buffers, texts = len(held), sum(len(s) for s in held.values())
    elsewhere = 0
    if words is not None:  # the user's words in any other entry of the tenant, or a fact about them
        traces = words.traces
        elsewhere = sum(traces.about(e) or (e.id not in words.cleared and traces.holds(e))
                        for e in await _others(places.store, tenant, traces))
    return DeletedCounts(entries=max(listed, len(recalled)) + elsewhere, working_memory=buffers, turns=texts,
                         queued_turns=queued, dead_letters=dead)


def _add(a: DeletedCounts, b: DeletedCounts) -> DeletedCounts:
    return DeletedCounts(**{name: getattr(a, name) + getattr(b, name) for name in DeletedCounts.model_fields})
