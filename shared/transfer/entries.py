"""A stored entry and its line in an export file, each made from the other field by field (no list copied by hand)."""
from pydantic import ValidationError

from engram_client.contract import EntryView, ExportedEntry
from engram_client.contract.failures import error_body
from engram_client.errors import InvalidRequest
from shared.store import MemoryEntry

_VIEW_FIELDS = tuple(EntryView.model_fields)
_NOT_INTERNAL = {*ExportedEntry.model_fields, "tenant_id"}  # the tenant is the header's, and the importer's


def exported_entry(entry: MemoryEntry, dense: list[float] | None = None, embedder: str | None = None) -> ExportedEntry:
    """The entry as an export carries it: the fields `entries` shows, every other stored field (whatever the
    store's model holds now, save the tenant) in `internal`, as stored, and its dense vector with the embedder's
    name when given."""
    stored = entry.model_dump(mode="json")
    internal = {name: value for name, value in stored.items() if name not in _NOT_INTERNAL}
    return ExportedEntry.model_construct(**{name: getattr(entry, name) for name in _VIEW_FIELDS}, type="entry",
                                         internal=internal, dense=dense or None, embedder=embedder if dense else None)


def stored_entry(line: ExportedEntry, tenant: str) -> MemoryEntry:
    """The entry an exported line stands for, filed under `tenant`; `internal` fields this engram does not know are
    left out (the store's model ignores them).

    Raises:
        InvalidRequest: an `internal` field holds a value the store's model refuses.
    """
    shown = {name: getattr(line, name) for name in _VIEW_FIELDS}
    try:
        return MemoryEntry.model_validate({**line.internal, **shown, "tenant_id": tenant})
    except ValidationError as exc:
        raise InvalidRequest(f"entry {line.id}: {error_body(exc).message}") from None
