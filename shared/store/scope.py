"""The one place where a scope and a filter become payload conditions; every backend query goes through it."""
from shared.store.model import Condition, EntryFilter, Scope

TENANT_FIELD = "tenant_id"


def conditions(scope: Scope, entry_filter: EntryFilter | None = None) -> list[Condition]:
    """All conditions a read or delete must apply: the tenant first, always, then the scope and the filter."""
    if not isinstance(scope, Scope):  # a dict or None would otherwise slip past the type checker at runtime
        raise TypeError(f"scope must be a Scope, got {type(scope).__name__}")
    out = [Condition(key=TENANT_FIELD, op="eq", value=scope.tenant_id)]
    if scope.user_id is not None:
        out.append(Condition(key="user_id", op="eq", value=scope.user_id))
    if scope.conversation_id is not None:
        out.append(Condition(key="conversation_id", op="eq", value=scope.conversation_id))
    f = entry_filter or EntryFilter()
    if f.persons:
        out.append(Condition(key="persons", op="any", value=list(f.persons)))
    if f.topics:
        out.append(Condition(key="topic", op="any", value=list(f.topics)))
    if f.location:
        out.append(Condition(key="location", op="eq", value=f.location))
    if f.kinds:
        out.append(Condition(key="kind", op="any", value=list(f.kinds)))
    if f.since or f.until:
        out.append(Condition(key="occurred_at", op="range", gte=f.since, lte=f.until))
    if f.ids:
        out.append(Condition(key="id", op="ids", value=list(f.ids)))
    if not f.include_superseded:
        out.append(Condition(key="superseded_by", op="is_null"))
    return out


# Payload fields with an index: keyword fields, plus the datetime one.
KEYWORD_INDEXES = ("user_id", "conversation_id", "persons", "kind", "topic", "location")
DATETIME_INDEXES = ("occurred_at",)
