"""The model's part in supersede: which facts and statements state the same fact about the same person.

Candidates are active facts close in meaning (dense cosine at least SAME_FACT_COSINE) of which at least one was
never asked about; each such group is one question to the model, which only groups ids. Code does the rest: a
statement the model groups with a fact joins that fact's slot (`slot_key`, marked `slot_by_model`), statements
grouped alone get a slot of their own, and supersede then decides by time which is current. Slotted facts keep
their slot, nothing is deleted, and every change is a payload update the entry's history shows.
"""
import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from shared.consolidation.changes import Change
from shared.errors import LlmInvalid, LlmUnavailable
from shared.llm import LlmClient, fell_back, prompts
from shared.llm.schemas import SameFactGroups
from shared.store import MemoryEntry

log = logging.getLogger("engram.consolidation")

SAME_FACT_COSINE = 0.75
MAX_GROUP = 12  # statements shown to the model at once


@dataclass(frozen=True)
class Candidate:
    """An active fact or statement with its dense vector."""

    entry: MemoryEntry
    dense: list[float]


def neighbourhoods(candidates: Sequence[Candidate], threshold: float = SAME_FACT_COSINE) -> list[list[Candidate]]:
    """Disjoint groups to ask about: each starts from a candidate never asked about and takes its closest others
    (cosine ≥ threshold), up to MAX_GROUP; a candidate left out of a full group starts or joins a later one."""
    if len(candidates) < 2:
        return []
    matrix = np.asarray([c.dense for c in candidates], dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    similar = matrix @ matrix.T
    grouped: set[int] = set()
    out = []
    for start in range(len(candidates)):
        if start in grouped or candidates[start].entry.same_fact_checked:
            continue
        order = [int(j) for j in np.argsort(-similar[start]) if j != start and j not in grouped
                 and similar[start, j] >= threshold]
        group = [start, *order[:MAX_GROUP - 1]]
        if len(group) > 1:
            grouped.update(group)
            out.append([candidates[i] for i in sorted(group)])
    return out


def _problem(ids: set[str], answer: SameFactGroups) -> str | None:
    used: set[str] = set()
    for i, group in enumerate(answer.groups):
        unknown = [g for g in group if g not in ids]
        if unknown:
            return f"groups[{i}] names {unknown[:3]}, which are not ids of `statements`"
        if used & set(group):
            return f"groups[{i}] repeats an id of an earlier group; each id belongs to one group at most"
        used |= set(group)
    return None


def regroup(group: list[MemoryEntry], answer: SameFactGroups) -> list[Change]:
    """Payload changes the model's groups cause: statements join a slot; every entry shown is marked asked."""
    by_id = {e.id: e for e in group}
    slot_of: dict[str, str] = {}
    for ids in answer.groups:
        members = [by_id[i] for i in dict.fromkeys(ids)]
        if len(members) < 2:
            continue
        slotted = sorted((m for m in members if m.attribute is not None), key=lambda m: (m.occurred_at, m.id))
        key = slotted[-1].slot_key if slotted else f"judged\x1f{min(m.id for m in members)}"
        for member in members:
            if member.attribute is None and key is not None:
                slot_of[member.id] = key
    out = []
    for entry in group:
        payload: dict[str, object] = {}
        if not entry.same_fact_checked:
            payload["same_fact_checked"] = True
        key = slot_of.get(entry.id)
        if key is not None and key != entry.slot_key:
            payload.update({"slot_key": key, "slot_by_model": True})
        if payload:
            out.append(Change(entry=entry, payload=payload))
    return out


async def judge(llm: LlmClient, tenant: str, candidates: Sequence[Candidate]) -> list[Change]:
    """Ask the model about each neighbourhood; one that it cannot answer is asked again on the next run."""
    out: list[Change] = []
    # On a worker thread: an owner's similarity matrix must not hold up the lease's renewal (or recalls).
    for hood in await asyncio.to_thread(neighbourhoods, candidates):
        entries = [c.entry for c in hood]
        document = prompts.document("consolidate", statements=[
            {"id": e.id, "text": e.text, "occurred_at": e.occurred_at, "subject": e.subject,
             "attribute": e.attribute, "value": e.value} for e in entries])
        ids = {e.id for e in entries}
        try:
            answer = await llm.ask(tenant, "consolidate", document, SameFactGroups,
                                   check=lambda a, ids=ids: _problem(ids, a))  # type: ignore[misc]
        except (LlmUnavailable, LlmInvalid) as exc:
            fell_back("consolidate", exc)
            continue
        out += regroup(entries, answer)
    return out
