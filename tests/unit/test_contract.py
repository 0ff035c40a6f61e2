"""Every contract model refuses oversized, malformed and cross-tenant input with a clear message."""
from typing import Any

import pytest
from pydantic import ValidationError

from engram_client.contract import (
    MAX_K,
    MAX_QUERY_CHARS,
    MAX_TEXT_CHARS,
    ConsolidateRequest,
    EntriesRequest,
    Flush,
    Forget,
    RecallRequest,
    Turn,
    check_tenant,
    validate_tenant,
)
from engram_client.errors import Forbidden, InvalidRequest

TURN: dict[str, Any] = {"conversation_id": "c1", "turn_id": "t1", "speaker": "Ana", "role": "user",
                        "text": "I moved to Lisbon in May 2023.", "ts": "2023-05-08T13:56:00+01:00"}
A_UUID, B_UUID = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"


def refused(model: type, payload: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate(payload)
    assert needle in str(info.value), str(info.value)


def test_a_valid_turn_round_trips_through_json() -> None:
    """A valid turn survives a JSON round trip unchanged, and its message id joins tenant, conversation and turn id."""
    turn = Turn.model_validate(TURN)
    assert Turn.model_validate_json(turn.model_dump_json()) == turn
    assert turn.msg_id("acme") == "acme:c1:t1"


def test_turn_is_frozen() -> None:
    """Assigning to a field of a validated turn raises instead of changing it."""
    turn = Turn.model_validate(TURN)
    with pytest.raises(ValidationError):
        turn.text = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(("change", "needle"), [
    ({"schema_version": 2}, "schema_version 2 is not supported"),
    ({"ts": "2023-05-08T13:56:00"}, "timezone"),
    ({"ts": "yesterday"}, "ts"),
    ({"text": "x" * (MAX_TEXT_CHARS + 1)}, f"at most {MAX_TEXT_CHARS} characters"),
    ({"text": "   "}, "non-whitespace"),
    ({"text": ""}, "at least 1 character"),
    ({"turn_id": ""}, "turn_id"),
    ({"turn_id": "x" * 129}, "at most 128 characters"),
    ({"conversation_id": "has space"}, "conversation_id"),
    ({"role": "robot"}, "role"),
    ({"tenant_id": "bad tenant!"}, "tenant_id"),
    ({"surprise": 1}, "Extra inputs are not permitted"),
    ({"metadata": {f"k{i}": i for i in range(40)}}, "at most 32"),
    ({"metadata": {"k": "v" * 2000}}, "at most 1024"),
    ({"metadata": {"k": {"nested": 1}}}, "metadata"),
])
def test_turn_refuses(change: dict[str, Any], needle: str) -> None:
    """Every malformed turn (unsupported schema version, naive or unparseable ts, empty, blank or oversized text, bad
    ids or role, an extra field, too much or nested metadata) is refused with a message naming the problem."""
    refused(Turn, {**TURN, **change}, needle)


def test_turn_requires_its_fields() -> None:
    """A turn without a speaker is refused, naming the missing field."""
    payload = dict(TURN)
    del payload["speaker"]
    refused(Turn, payload, "speaker")


def test_flush_refuses_unknown_fields_and_missing_conversation() -> None:
    """A flush with an unknown field, or without a conversation id, is refused."""
    refused(Flush, {"conversation_id": "c1", "force": True}, "Extra inputs")
    refused(Flush, {}, "conversation_id")


@pytest.mark.parametrize(("payload", "needle"), [
    ({"query": ""}, "at least 1 character"),
    ({"query": "  \n "}, "non-whitespace"),
    ({"query": "q" * (MAX_QUERY_CHARS + 1)}, f"at most {MAX_QUERY_CHARS}"),
    ({"query": "q", "k": 0}, "greater than or equal to 1"),
    ({"query": "q", "k": 10_000}, "less than or equal to 100"),
    ({"query": "q", "token_budget": 0}, "greater than or equal to 1"),
    ({"query": "q", "token_budget": 10**7}, "less than or equal to 32000"),
    ({"query": "q", "mode": "slow"}, "mode"),
    ({"query": "q", "filters": {"since": "2023-06-01T00:00:00Z", "until": "2023-05-01T00:00:00Z"}}, "is after"),
    ({"query": "q", "filters": {"since": "2023-06-01"}}, "timezone"),
    ({"query": "q", "filters": {"persons": ["p"] * 100}}, "at most 32"),
    ({"query": "q", "filters": {"colour": "red"}}, "Extra inputs"),
    ({"query": "q", "user_id": "u 1"}, "user_id"),
    ({"query": "q", "schema_version": 0}, "schema_version 0 is not supported"),
])
def test_recall_request_refuses(payload: dict[str, Any], needle: str) -> None:
    """A recall request with a blank or oversized query, k or token budget out of range, an unknown mode, inverted or
    naive time filters, too many persons, an unknown filter, a bad user id or an unsupported schema version is
    refused, naming the problem."""
    refused(RecallRequest, payload, needle)


def test_recall_request_defaults() -> None:
    """A recall request with only a query returns at most 10 entries, in fast mode, with no token budget and no
    explanation; a budget alone lets as many entries as fit (up to MAX_K), and k caps it."""
    request = RecallRequest(query="Where does Ana live?")
    assert (request.limit, request.mode, request.token_budget, request.explain) == (10, "fast", None, False)
    assert RecallRequest(query="Where does Ana live?", token_budget=2000).limit == MAX_K
    assert RecallRequest(query="Where does Ana live?", token_budget=2000, k=3).limit == 3


@pytest.mark.parametrize(("payload", "needle"), [
    ({}, "exactly one"),
    ({"user_id": "u1", "conversation_id": "c1"}, "exactly one"),
    ({"entry_ids": []}, "at least 1 item"),
    ({"entry_ids": [A_UUID] * 1000}, "at most 256"),
    ({"entry_ids": ["e1"]}, "at least 32 characters"),
])
def test_forget_refuses(payload: dict[str, Any], needle: str) -> None:
    """A forget request must name exactly one of user, conversation or entries, and its entry ids must be 1 to 256
    full-length ids."""
    refused(Forget, payload, needle)


@pytest.mark.parametrize(("payload", "needle"), [
    ({"op": "get"}, "needs ids"),
    ({"op": "history", "ids": [A_UUID, B_UUID]}, "exactly one id"),
    ({"op": "get", "ids": ["not-a-uuid-but-a-long-enough-id-x"]}, "entry ids are UUIDs"),
    ({"op": "list", "cursor": "page-2"}, "at least 32 characters"),
    ({"op": "drop"}, "op"),
    ({"limit": 100_000}, "less than or equal to 500"),
])
def test_entries_request_refuses(payload: dict[str, Any], needle: str) -> None:
    """An entries request is refused when get lacks ids, history names more than one id, an id is no UUID, a cursor is
    too short, the op is unknown or the limit exceeds 500."""
    refused(EntriesRequest, payload, needle)


def test_entry_ids_are_read_in_their_canonical_form() -> None:
    """Entry ids given in upper case or in braces are normalised to canonical lower-case UUIDs."""
    request = EntriesRequest(op="get", ids=[A_UUID.upper(), "{" + B_UUID + "}"])
    assert request.ids == [A_UUID, B_UUID]


def test_consolidate_request_refuses_unknown_jobs() -> None:
    """A consolidate request naming an unknown job is refused."""
    refused(ConsolidateRequest, {"jobs": ["defragment"]}, "jobs")


def test_payload_naming_another_tenant_is_forbidden() -> None:
    """A payload whose tenant differs from the subject's is forbidden with both named, while a matching or absent
    payload tenant passes."""
    turn = Turn.model_validate({**TURN, "tenant_id": "globex"})
    with pytest.raises(Forbidden, match="payload tenant 'globex' != subject tenant 'acme'"):
        check_tenant(turn, "acme")
    check_tenant(turn, "globex")
    check_tenant(Turn.model_validate(TURN), "acme")  # no tenant in the payload: the subject's counts


@pytest.mark.parametrize("tenant", ["", "a" * 65, "acme.corp", "acme*", "ac me", ">", "dlq"])
def test_subject_tenant_must_be_a_valid_id(tenant: str) -> None:
    """Empty, overlong, dotted, wildcard, spaced and reserved tenant ids in a subject are refused as invalid
    requests."""
    with pytest.raises(InvalidRequest, match=r"does not match|reserved"):
        validate_tenant(tenant)
