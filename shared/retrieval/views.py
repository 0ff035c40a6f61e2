"""What the wire shows of a stored entry: the operators' view and the recalled entry, projected field by field.

The store's model and the contract's views are separate models (the store may add payload fields freely; the
contract changes only with its version). A view takes the already validated values of the fields it shares with
the entry by name, so nothing is copied by hand and nothing is validated twice.
"""
from typing import Any

from pydantic import BaseModel

from engram_client.contract import EntryView, Explanation, RecalledEntry
from shared.store import MemoryEntry, ScoredEntry

_VIEW_FIELDS = tuple(EntryView.model_fields)
_RECALLED_FIELDS = tuple(name for name in RecalledEntry.model_fields
                         if name not in ("score", "explanation", "excerpt"))


def _shared(entry: MemoryEntry, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in names}


def shared_fields(view: type[BaseModel]) -> set[str]:
    """Fields of `view` that a MemoryEntry must also have, with the same meaning (checked by a unit test)."""
    return set(_VIEW_FIELDS if view is EntryView else _RECALLED_FIELDS)


def entry_view(entry: MemoryEntry) -> EntryView:
    """An entry as the entries subject shows it (no tenant, no scope keys, no vectors)."""
    return EntryView.model_construct(**_shared(entry, _VIEW_FIELDS))


def recalled_entry(hit: ScoredEntry, explanation: Explanation | None = None, excerpt: bool = False) -> RecalledEntry:
    """A hit as a recall returns it (`excerpt`: its entry is cut to some of its turns, shared/retrieval/excerpt.py)."""
    return RecalledEntry.model_construct(**_shared(hit.entry, _RECALLED_FIELDS), score=hit.score,
                                         excerpt=excerpt, explanation=explanation)
