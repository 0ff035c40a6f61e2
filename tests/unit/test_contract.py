"""Every contract model refuses oversized, malformed and cross-tenant input with a clear message."""
from typing import Any

import pytest
from pydantic import ValidationError

from engram_client.contract import (
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
    turn = Turn.model_validate(TURN)
    assert Turn.model_validate_json(turn.model_dump_json()) == turn
    assert turn.msg_id("acme") == "acme:c1:t1"


def test_turn_is_frozen() -> None:
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
    refused(Turn, {**TURN, **change}, needle)


def test_turn_requires_its_fields() -> None:
    payload = dict(TURN)
    del payload["speaker"]
    refused(Turn, payload, "speaker")


def test_flush_refuses_unknown_fields_and_missing_conversation() -> None:
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
    refused(RecallRequest, payload, needle)


def test_recall_request_defaults() -> None:
    request = RecallRequest(query="Where does Ana live?")
    assert (request.k, request.mode, request.token_budget, request.explain) == (10, "fast", None, False)


@pytest.mark.parametrize(("payload", "needle"), [
    ({}, "exactly one"),
    ({"user_id": "u1", "conversation_id": "c1"}, "exactly one"),
    ({"entry_ids": []}, "at least 1 item"),
    ({"entry_ids": [A_UUID] * 1000}, "at most 256"),
    ({"entry_ids": ["e1"]}, "at least 32 characters"),
])
def test_forget_refuses(payload: dict[str, Any], needle: str) -> None:
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
    refused(EntriesRequest, payload, needle)


def test_entry_ids_are_read_in_their_canonical_form() -> None:
    request = EntriesRequest(op="get", ids=[A_UUID.upper(), "{" + B_UUID + "}"])
    assert request.ids == [A_UUID, B_UUID]


def test_consolidate_request_refuses_unknown_jobs() -> None:
    refused(ConsolidateRequest, {"jobs": ["defragment"]}, "jobs")


def test_payload_naming_another_tenant_is_forbidden() -> None:
    turn = Turn.model_validate({**TURN, "tenant_id": "globex"})
    with pytest.raises(Forbidden, match="payload tenant 'globex' != subject tenant 'acme'"):
        check_tenant(turn, "acme")
    check_tenant(turn, "globex")
    check_tenant(Turn.model_validate(TURN), "acme")  # no tenant in the payload: the subject's counts


@pytest.mark.parametrize("tenant", ["", "a" * 65, "acme.corp", "acme*", "ac me", ">", "dlq"])
def test_subject_tenant_must_be_a_valid_id(tenant: str) -> None:
    with pytest.raises(InvalidRequest, match=r"does not match|reserved"):
        validate_tenant(tenant)
