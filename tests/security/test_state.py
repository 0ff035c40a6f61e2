"""State engram reads back from NATS is untrusted input: values that do not parse, planted in every bucket engram
keeps (as a reply subject aimed at them would have written before products had accounts of their own, or a broken
writer could), are reported and skipped or repaired. They stop no watch, forget, lease or schedule, and no request
is answered `invalid_request` for them."""
import base64

from nats.js.api import KeyValueConfig

from engram_client import wait_until_stored
from services.stack import Running
from shared.messaging import streams
from shared.working_memory.buckets import bucket_names, key, summaries_bucket_name
from shared.working_memory.forgotten import bucket_name as marks_bucket
from shared.working_memory.forgotten import mark_key
from tests.support.attack import Tenants
from tests.support.polling import eventually
from tests.support.scrape import metric
from tests.support.secured import Deployment, raw
from tests.support.turns import conversation

IDLE_TIMEOUT_S = 2.0  # windows close when idle, so that the open-index watch is what closes them
# What JetStream's acknowledgement looks like, as it would have landed in a key a reply subject named.
PUB_ACK = b'{"stream":"MEM_TURNS","seq":42}'


async def _plant(deployment: Deployment, values: dict[tuple[str, str], bytes]) -> None:
    """Write values into engram's buckets with engram's own user (bucket, key) -> value."""
    insider = await raw(deployment, deployment.engram_security(), "insider")
    try:
        js = insider.nc.jetstream()
        for (bucket, k), value in values.items():
            try:
                kv = await js.key_value(bucket)
            except Exception:
                kv = await js.create_key_value(KeyValueConfig(bucket=bucket))
            await kv.put(k, value)
    finally:
        await insider.nc.close()


async def test_unreadable_state_stops_no_watch_forget_or_schedule(deployment: Deployment, stack: Running,
                                                                  tenants: Tenants) -> None:
    """Values that do not parse in the open index (also a key engram did not write), the forget marks, the schedule's
    records, a buffer and a summary: the victim's window still closes when idle and is stored, a recall reading the
    broken buffer's conversation is answered, the victim's forget is verified, the victim's schedule record is
    written over, and each unreadable value is counted in engram_state_unreadable_total."""
    victim = tenants.victim
    buffers, _, open_index = bucket_names("mem")
    _, runs = streams.consolidation_buckets("mem")
    broken = key(victim, "v-broken")
    planted = {
        (open_index, key(victim, "v-elsewhere")): PUB_ACK,              # a mark whose value is no time
        (open_index, f"{victim}.a"): PUB_ACK,                           # a key engram never wrote (no base64)
        (marks_bucket("mem"), mark_key(victim, "u", "u1")): PUB_ACK,    # a forget mark of no sequence
        (runs, victim): PUB_ACK,                                        # a schedule record of no slot
        (buffers, broken): b"\x00\xff not a buffer",                    # a conversation's buffer
        (summaries_bucket_name("mem"), broken): b"[1, 2, 3]",           # its running summary
    }
    before = await metric(stack.http_port, "engram_state_unreadable_total")
    await _plant(deployment, planted)
    turns = conversation([("Ana", "I started learning the cello this week."), ("Bot", "How exciting!")],
                         conversation_id="v-cello")
    async with await deployment.client(victim) as client:
        # The open-index watch started over on the planted marks and kept going: an idle window still closes.
        await client.publish_turns(turns)
        await wait_until_stored(client, turns, timeout_s=60)
        answered = await client.recall("What did she start?", conversation_id="v-broken", include_working_memory=True)
        assert answered.error is None
        # The schedule writes a record of its own over the planted one, so the victim is consolidated again.
        insider = await raw(deployment, deployment.engram_security(), "insider")
        try:
            kv = await insider.nc.jetstream().key_value(runs)
            await eventually(lambda: kv.get(victim), lambda entry: entry.value != PUB_ACK, timeout_s=60)
        finally:
            await insider.nc.close()
        receipt = await client.forget(user_id="u1")
        assert receipt.verified and receipt.deleted.entries >= 1
    assert await metric(stack.http_port, "engram_state_unreadable_total") >= before + 4
    for place in ("open_index", "forget_marks", "runs", "buffers"):
        assert await metric(stack.http_port, "engram_state_unreadable_total", place=place) >= 1, place


def test_a_planted_key_is_named_in_base64_as_engram_writes_them() -> None:
    """The planted keys above are the ones engram reads: conversation keys are base64url of the conversation id."""
    assert key("t", "v-broken") == "t." + base64.urlsafe_b64encode(b"v-broken").decode().rstrip("=")
