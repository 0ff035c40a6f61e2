"""The `forget` tool: it shows what it would erase first, and erases only once that is confirmed.

A model acts on what it reads, and what it reads (a web page, a document, a recalled memory) may tell it to erase
the user's memory. So no single call erases anything that was not shown first:

- a client that can ask its user (MCP elicitation, form mode) gets the question with the preview, answered by the
  person through the client (the SDK's `Resolve`/`Elicit`: a standalone request mid-call on older protocol
  revisions, an `InputRequiredResult` round on 2026-07-28 and later); only an answer to erase erases, and no
  confirm token is issued to such a client;
- any other client gets the preview and a `confirm` token (services/mcp/confirm.py): calling `forget` again with
  the same arguments and that token, within a few minutes, erases what the preview named, and nothing else.
"""
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    DeclinedElicitation,
    Elicit,
    MCPServer,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ClientCapabilities, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from engram_client import MemoryClient
from engram_client.contract import EntryKind
from engram_client.errors import NotFound
from services.mcp.confirm import Confirmations, Target
from services.mcp.errors import tool_errors

SHORT_TEXT_CHARS = 80
EVERYTHING_PAGE = 500  # entries counted for the preview of everything

ANNOTATIONS = ToolAnnotations(title="Forget (shows what it would erase, then asks)", read_only_hint=False,
                              destructive_hint=True, idempotent_hint=True, open_world_hint=False)


class Doomed(BaseModel):
    """An entry a forget request names: its id, kind and the start of its text."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: EntryKind
    text: str


class ForgetOutcome(BaseModel):
    """What `forget` did: showed a preview (nothing erased), or erased what a confirmed preview named."""

    erased: bool = Field(description="false: this call erased nothing")
    preview: str = Field(description="what the request erases, in words")
    entries: list[Doomed] = Field(description="the entries it names (none listed for everything)")
    confirm: str | None = Field(default=None, description="the token that confirms exactly this request, once")
    confirm_expires_at: datetime | None = None
    deleted_entries: int = 0
    verified: bool = Field(default=False, description="a check after erasing found nothing of it left")
    note: str = Field(description="what happened, and what to do next")


class Consent(BaseModel):
    """The question a client that can ask its user shows with the preview."""

    erase: bool = Field(title="Erase it", description="yes: erase it now (this cannot be undone)")


class NotAsked(BaseModel):
    """What the question resolves to when the user is not asked: the client cannot, or the call has a token."""


@dataclass(frozen=True)
class Plan:
    """A forget request checked against the store: its canonical target and its preview."""

    target: Target
    preview: str
    entries: list[Doomed]


async def plan(client: MemoryClient, user_id: str, entry_ids: list[str] | None, everything: bool) -> Plan:
    """What the request would erase; refuses entries that are not the user's, and asks for exactly one subject."""
    if everything == bool(entry_ids):
        raise ToolError("invalid_request: give entry_ids, or everything=true, not both or neither")
    if everything:
        page = await client.entries(op="list", user_id=user_id, limit=EVERYTHING_PAGE)
        count = f"{len(page.entries)}{' or more' if page.next_cursor else ''}"
        preview = (f"everything engram holds about user {user_id!r} in tenant {client.tenant!r}: its stored "
                   f"entries ({count} now: episodes, facts, its profile), its turns in working memory and in the "
                   f"turns stream, and its dead letters")
        return Plan(Target(everything=True), preview, [])
    assert entry_ids is not None
    page = await client.entries(op="get", ids=entry_ids)
    owned = sorted((e for e in page.entries if e.user_id == user_id), key=lambda e: e.id)
    missing = [i for i in entry_ids if _canonical(i) not in {e.id for e in owned}]
    if missing:
        raise NotFound(f"no entries {missing} of this user")
    doomed = [Doomed(id=e.id, kind=e.kind, text=_short(e.text)) for e in owned]
    listed = "; ".join(f"{d.id} ({d.kind}) {d.text!r}" for d in doomed)
    preview = f"{len(doomed)} entr{'y' if len(doomed) == 1 else 'ies'} of user {user_id!r}: {listed}"
    return Plan(Target(everything=False, entry_ids=tuple(d.id for d in doomed)), preview, doomed)


def can_ask_user(capabilities: ClientCapabilities | None) -> bool:
    """Whether the client declared form elicitation (a bare `elicitation: {}` is form, as the SDK reads it)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


Asked = AcceptedElicitation[Consent | NotAsked] | DeclinedElicitation | CancelledElicitation


def register(server: MCPServer[Any], client: MemoryClient, user_id: str, confirmations: Confirmations) -> None:
    """Add `forget` to the server, acting for `user_id`; previews' tokens are kept in `confirmations`."""

    @tool_errors
    async def ask_user(ctx: Context, entry_ids: list[str] | None, everything: bool,
                       confirm: str | None) -> Elicit[Consent] | NotAsked:
        if confirm is not None or not can_ask_user(ctx.client_capabilities):
            return NotAsked()  # the tool body decides, with the token or by issuing one
        found = await plan(client, user_id, entry_ids, everything)
        return Elicit(f"An agent asks engram to erase {found.preview}.\n\nErase it? This cannot be undone.",
                      Consent)

    @server.tool(annotations=ANNOTATIONS)
    @tool_errors
    async def forget(entry_ids: Annotated[list[str] | None, Field(description="ids of entries to erase")] = None,
                     everything: Annotated[bool, Field(description="erase everything stored about the user")] = False,
                     confirm: Annotated[str | None, Field(
                         description="the confirm token of this same request's preview, once the user agreed to "
                                     "it; without it nothing is erased")] = None,
                     *, asked: Annotated[Asked, Resolve(ask_user)]) -> ForgetOutcome:
        """Erase entries of the user (entry_ids), or everything engram holds about the user (everything=true).

        A call erases nothing it has not shown first. Without `confirm` it returns a preview of what would go and,
        unless the client asked the user itself, a `confirm` token: show the preview to the user, and only if they
        agree call forget again with the same arguments and confirm=<token> (valid once, for a few minutes)."""
        found = await plan(client, user_id, entry_ids, everything)
        if isinstance(asked, AcceptedElicitation) and isinstance(asked.data, Consent):
            if asked.data.erase:
                return await _erase(client, user_id, found, "the user agreed")
            return _kept(found, "the user answered not to erase it; nothing was erased")
        if isinstance(asked, DeclinedElicitation | CancelledElicitation):
            return _kept(found, f"the user {'declined' if asked.action == 'decline' else 'cancelled'} the "
                                f"question; nothing was erased")
        if confirm is not None:
            confirmations.redeem(confirm, found.target, user_id)
            return await _erase(client, user_id, found, "confirmed with the preview's token")
        issued = confirmations.issue(found.target)
        return ForgetOutcome(
            erased=False, preview=f"forget would erase {found.preview}", entries=found.entries,
            confirm=issued.token, confirm_expires_at=issued.expires_at,
            note=f"nothing was erased. Show the user this preview; only if they agree, call forget again with the "
                 f"same arguments and confirm={issued.token!r} before {issued.expires_at:%H:%M:%S} UTC")


async def _erase(client: MemoryClient, user_id: str, found: Plan, why: str) -> ForgetOutcome:
    if found.target.everything:
        receipt = await client.forget(user_id=user_id)
    else:
        receipt = await client.forget(entry_ids=list(found.target.entry_ids))
    return ForgetOutcome(erased=True, preview=f"erased {found.preview}", entries=found.entries,
                         deleted_entries=receipt.deleted.entries, verified=receipt.verified,
                         note=f"erased ({why}); verified={receipt.verified}")


def _kept(found: Plan, note: str) -> ForgetOutcome:
    return ForgetOutcome(erased=False, preview=f"forget would erase {found.preview}", entries=found.entries,
                         note=note)


def _short(text: str) -> str:
    """The start of an entry's text, on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= SHORT_TEXT_CHARS else flat[:SHORT_TEXT_CHARS - 1] + "…"


def _canonical(entry_id: str) -> str:
    """An entry id as engram spells it (ids are UUIDs; another spelling of the same one is the same entry)."""
    try:
        return str(uuid.UUID(entry_id))
    except ValueError:
        return entry_id
