"""Bad input on every subject: a clear error reply or a dead-lettered message with its reason; service keeps up."""
import json
from typing import Any

import nats
import pytest

from engram_client import MemoryClient
from services.stack import Running
from shared.messaging import deadletter
from tests.support.dead_letters import dead_letters
from tests.support.polling import eventually
from tests.support.turns import make_turn

GOOD_TURN = json.loads(make_turn("I moved to Lisbon.", conversation_id="c1", turn_id="t1").model_dump_json())


@pytest.mark.parametrize(("kind", "payload", "code", "needle"), [
    ("recall", b"{not json", "invalid_request", "JSON"),
    ("recall", b'{"query": "hi", "schema_version": 2}', "invalid_request", "schema_version 2 is not supported"),
    ("recall", b'{"query": ""}', "invalid_request", "query"),
    ("recall", b'{"query": "   "}', "invalid_request", "non-whitespace"),
    ("recall", b'{"query": "hi", "k": 0}', "invalid_request", "k"),
    ("recall", b'{"query": "hi", "k": 1000000}', "invalid_request", "k"),
    ("recall", b'{"query": "hi", "colour": "red"}', "invalid_request", "colour"),
    ("recall", json.dumps({"query": "x" * 5000}).encode(), "invalid_request", "query"),
    ("recall", b'{"query": "hi", "filters": {"since": "2024-01-01T09:00:00"}}', "invalid_request", "timezone"),
    ("recall", b'{"query": "hi", "filters": {"since": "2024-01-01"}}', "invalid_request", "filters.since"),
    ("recall", b'{"query": "hi", "k": "3"}', "invalid_request", "k: Input should be a valid integer"),
    ("recall", b'{"query": "hi", "token_budget": true}', "invalid_request", "token_budget"),
    ("recall", b'{"query": "hi", "mode": "shallow"}', "invalid_request", "mode"),
    ("recall", b'{"query": "hi", "tenant_id": "someone-else"}', "forbidden", "someone-else"),
    ("recall", b"[1, 2]", "invalid_request", ""),
    ("entries", b'{"op": "get"}', "invalid_request", "needs ids"),
    ("entries", b'{"op": "explode"}', "invalid_request", "op"),
    ("entries", b'{"limit": -1}', "invalid_request", "limit"),
    ("entries", b'{"limit": "5"}', "invalid_request", "limit"),
    ("entries", b'{"tenant_id": "someone-else"}', "forbidden", "someone-else"),
])
async def test_request_reply_errors(client: MemoryClient, kind: str, payload: bytes, code: str, needle: str) -> None:
    """Each malformed or out-of-tenant recall or entries request gets an error reply with the expected code and a
    message naming the problem, and the service answers the next request."""
    reply = await client.raw_request(kind, payload)
    assert reply["error"]["code"] == code, reply
    assert needle in reply["error"]["message"], reply
    # The service keeps serving.
    ok = await client.raw_request("recall", b'{"query": "still there?"}')
    assert ok.get("error") is None and ok["entries"] == []


def _turn(**change: Any) -> bytes:
    return json.dumps({**GOOD_TURN, **change}).encode()


@pytest.mark.parametrize(("subject_kind", "payload", "code", "needle"), [
    ("turns", b"{not json", "invalid_request", "JSON"),
    ("turns", _turn(schema_version=2), "invalid_request", "schema_version 2 is not supported"),
    ("turns", _turn(text="x" * 20_000), "invalid_request", "at most 16000 characters"),
    ("turns", _turn(surprise=True), "invalid_request", "surprise"),
    ("turns", _turn(ts="2024-01-01T10:00:00"), "invalid_request", "timezone"),
    ("turns", _turn(ts="not a time"), "invalid_request", "ts"),
    ("turns", _turn(tenant_id="someone-else"), "forbidden", "someone-else"),
    ("flush", b'{"conversation": "c1"}', "invalid_request", "conversation_id"),
    ("flush", b"null", "invalid_request", ""),
])
async def test_bad_turns_and_flushes_are_dead_lettered_with_their_reason(
        stack: Running, client: MemoryClient, subject_kind: str, payload: bytes, code: str, needle: str) -> None:
    """Each malformed or out-of-tenant turn or flush is dead-lettered once, unchanged, with its code, reason, subject
    and service, and a good turn after it still becomes memory."""
    nc = await nats.connect(stack.nats_url)
    subject = f"mem.{client.tenant}.{subject_kind}"
    await nc.jetstream().publish(subject, payload)
    await nc.close()
    [letter] = await dead_letters(stack.nats_url, client.tenant)
    assert letter.data == payload  # the body is kept as it was
    headers = letter.headers or {}
    assert headers[deadletter.HEADER_CODE] == code
    assert needle in headers[deadletter.HEADER_REASON]
    assert headers[deadletter.HEADER_SUBJECT] == subject
    assert headers[deadletter.HEADER_SERVICE] == "ingestor"
    assert headers[deadletter.HEADER_DELIVERIES] == "1"  # bad input is not retried
    # A good turn after the bad one still becomes memory.
    await client.publish_turn(make_turn("I adopted a cat named Pixel.", conversation_id="c9"))
    await client.flush("c9")
    found = await eventually(lambda: client.recall("cat", conversation_id="c9"), lambda r: bool(r.entries))
    assert "Pixel" in found.entries[0].text


async def test_a_repeated_turn_id_is_stored_once(client: MemoryClient) -> None:
    """A turn published again under the same turn id is stored once, as first sent, not as the later text."""
    turn = make_turn("My favourite colour is teal.", conversation_id="c5", turn_id="dup")
    await client.publish_turn(turn)
    # A second publish within the dedup window is dropped by JetStream; a later redelivery by the KV buffer.
    again = make_turn("My favourite colour is teal (edited).", conversation_id="c5", turn_id="dup")
    await client.publish_turn(again)
    await client.flush("c5")
    found = await eventually(lambda: client.entries(op="list", conversation_id="c5", kind="episodic"),
                             lambda r: bool(r.entries))
    assert [e.source_turn_ids for e in found.entries] == [["dup"]]
    assert "edited" not in found.entries[0].text
