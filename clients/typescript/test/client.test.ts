// The TypeScript client against a real `engram up` (ENGRAM_NATS_URL; tests/e2e/test_typescript_client.py starts
// one with one recall worker per tenant, so a burst of recalls from one tenant is refused with a retry hint).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, test } from "node:test";

import { connect } from "@nats-io/transport-node";

import {
  ERROR_CODES,
  EngramError,
  Forbidden,
  InternalError,
  InvalidRequest,
  MemoryClient,
  NotFound,
  Timeout,
  Unavailable,
  errorFromReply,
  waitUntilStored,
} from "../src/index.js";
import type { EngramEvent, ErrorCode, Turn } from "../src/index.js";

const url = process.env["ENGRAM_NATS_URL"];
if (!url) throw new Error("set ENGRAM_NATS_URL to a running engram's NATS (tests/e2e/test_typescript_client.py does)");
const servers = url;
const tenantOf = (name: string): string => `ts-${name}-${randomUUID().slice(0, 8)}`;
const clients: MemoryClient[] = [];
async function client(tenant: string, timeoutMs = 10_000): Promise<MemoryClient> {
  const made = await MemoryClient.connect({ servers, tenant, timeoutMs });
  clients.push(made);
  return made;
}
after(async () => {
  await Promise.all(clients.map((c) => c.close()));
});

function turn(conversation: string, n: number, speaker: string, text: string): Turn {
  return {
    conversation_id: conversation,
    turn_id: `t${n}`,
    speaker,
    role: speaker === "Ana" ? "user" : "assistant",
    text,
    ts: `2024-05-08T10:0${n}:00+00:00`,
    user_id: "ana",
  };
}

async function rejectsWith(promise: Promise<unknown>, code: ErrorCode): Promise<EngramError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof EngramError, `expected an EngramError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    return err;
  }
  assert.fail(`expected ${code}, got an answer`);
}

test("a conversation is published, stored, recalled, announced and forgotten", async () => {
  const tenant = tenantOf("flow");
  const memory = await client(tenant, 30_000);
  const events = memory.events();
  const seen: EngramEvent[] = [];
  const collecting = (async () => {
    for await (const e of events) seen.push(e);
  })();
  const turns = [
    turn("c1", 1, "Ana", "I moved to Lisbon in May 2023, I love the light there."),
    turn("c1", 2, "Bot", "Lisbon is lovely. Do you still work at Farfetch?"),
    turn("c1", 3, "Ana", "Yes, and my dog Luna loves the beach at Cascais."),
  ];
  const seqs = await memory.publishTurns(turns);
  assert.equal(new Set(seqs).size, 3);
  assert.equal(await memory.publishTurn(turns[0]!), seqs[0], "a repeated Nats-Msg-Id is the same message");
  await memory.flush("c1");
  await waitUntilStored(memory, turns, { timeoutMs: 60_000, intervalMs: 200 });

  const found = await memory.recall("Where does Ana live?", { k: 3, token_budget: 500 });
  assert.ok(found.entries.length > 0);
  assert.match(found.entries[0]!.text, /Lisbon/);
  assert.match(found.context, /Lisbon/);
  assert.ok(found.context_tokens > 0 && found.context_tokens <= 500);
  // A budget alone: the best entries that fit, and how many relevant ones did not.
  const packed = await memory.recall("Where does Ana live?", { token_budget: 500 });
  assert.ok(packed.context_tokens > 0 && packed.context_tokens <= 500);
  assert.ok(packed.entries.length > 0 && Number.isInteger(packed.left_out));

  // Another tenant naming these entries' ids finds and deletes nothing.
  const ids = found.entries.map((e) => e.id) as [string, ...string[]]; // non-empty: asserted above
  const stranger = await client(tenantOf("stranger"));
  const foreign = await stranger.forget({ entry_ids: ids });
  assert.equal(foreign.deleted.entries, 0);
  assert.equal((await memory.entries({ op: "get", ids })).entries.length, ids.length);

  const receipt = await memory.forget({ conversation_id: "c1" });
  assert.ok(receipt.verified, JSON.stringify(receipt));
  assert.ok(receipt.deleted.entries >= 1);
  const after = await memory.recall("Where does Ana live?", { k: 3 });
  assert.deepEqual(after.entries.filter((e) => e.conversation_id === "c1"), []);

  const deadline = Date.now() + 10_000;
  while (!seen.some((e) => e.kind === "entries_forgotten") && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  events.close();
  await collecting;
  const created = seen.filter((e) => e.kind === "entry_created");
  assert.ok(created.length >= 1);
  assert.ok(created.every((e) => e.kind === "entry_created" && e.event.conversation_id === "c1"));
  const forgotten = seen.find((e) => e.kind === "entries_forgotten");
  assert.ok(forgotten && forgotten.kind === "entries_forgotten" && forgotten.event.count >= 1);
});

test("a bad tenant id is refused before anything is sent", async () => {
  await rejectsWith(MemoryClient.connect({ servers, tenant: "no spaces" }), "invalid_request");
  await rejectsWith(MemoryClient.connect({ servers, tenant: "dlq" }), "invalid_request");
});

test("engram's refusals come back as typed errors with their wire codes", async () => {
  const tenant = tenantOf("errors");
  const memory = await client(tenant);
  const tooLong = await rejectsWith(memory.recall("x".repeat(5_000)), "invalid_request");
  assert.ok(tooLong instanceof InvalidRequest && /query/.test(tooLong.message));
  await rejectsWith(memory.recall("hi", { k: 0 }), "invalid_request");
  await rejectsWith(memory.forget({}), "invalid_request");
  await rejectsWith(memory.entries({ op: "get", ids: ["not-a-uuid"] }), "invalid_request");
  const other = await rejectsWith(memory.recall({ query: "hi", tenant_id: "someone-else" }), "forbidden");
  assert.ok(other instanceof Forbidden && /someone-else/.test(other.message));
  await rejectsWith(memory.consolidate({ tenant_id: "someone-else" }), "forbidden");
  // The history of an entry this tenant does not hold (another tenant's, or none at all).
  const missing = await rejectsWith(
    memory.entries({ op: "history", ids: ["00000000-0000-4000-8000-000000000000"] }), "not_found");
  assert.ok(missing instanceof NotFound && !missing.retryable);
  // No answer in time (a responder that never answers: engram's own reply may beat any short timer on a busy
  // machine), and nobody answering at all.
  const silent = await connect({ servers });
  try {
    silent.subscribe(`${memory.prefix}.${tenant}.silent`);
    await silent.flush();
    await rejectsWith(memory.rawRequest("silent", "{}", 200), "timeout");
  } finally {
    await silent.close();
  }
  const nobody = await rejectsWith(memory.rawRequest("nobody-answers-this", "{}"), "unavailable");
  assert.ok(nobody.retryable && nobody.retryAfterMs === undefined);
});

test("a tenant past its share is refused with a retry hint, and the client waits it out", async () => {
  const tenant = tenantOf("busy");
  const patient = await client(tenant, 30_000);
  // A client that ignores the hint and asks again at once sees the refusal and its hint.
  const hints: number[] = [];
  let flooding = true;
  const flood = Array.from({ length: 16 }, async () => {
    while (flooding) {
      const reply = await patient.rawRequest("recall", JSON.stringify({ query: "Where does Bo live?" }));
      const error = reply.data["error"] as { code: string } | null;
      if (error?.code === "unavailable" && reply.retryAfterMs !== undefined) hints.push(reply.retryAfterMs);
    }
  });
  // A client whose timeout leaves no room to wait gets the refusal itself, hint included.
  const hurried = await client(tenant, 40);
  let refusal: EngramError | undefined;
  for (let i = 0; i < 500 && refusal === undefined; i++) {
    try {
      await hurried.recall("Where does Bo live?");
    } catch (err) {
      if (err instanceof Unavailable) refusal = err;
      else if (!(err instanceof Timeout)) throw err;
    }
  }
  flooding = false;
  await Promise.all(flood);
  assert.ok(hints.length > 0 && hints.every((h) => h > 0), `hints ${JSON.stringify(hints.slice(0, 5))}`);
  assert.ok(refusal, "no refusal reached the hurried client");
  assert.ok(refusal.retryable && refusal.retryAfterMs !== undefined && refusal.retryAfterMs > 0);

  // 24 recalls at once, one in flight allowed: all answered, the refusals waited out and asked again.
  const answers = await Promise.all(Array.from({ length: 24 }, () => patient.recall("Where does Bo live?")));
  assert.equal(answers.length, 24);
  assert.ok(answers.every((a) => a.error === null));
  assert.ok(patient.retried > 0, "the share held, so the client must have retried");
});

test("every wire code has its error class", () => {
  const classes = [InvalidRequest, Forbidden, NotFound, Unavailable, Timeout, InternalError];
  assert.deepEqual(
    ERROR_CODES.map((code) => errorFromReply({ code, message: "m" }).constructor),
    classes,
  );
  assert.deepEqual(ERROR_CODES.filter((code) => errorFromReply({ code, message: "m" }).retryable), [
    "unavailable",
    "timeout",
  ]);
});

test("a turn whose acknowledgement is lost is sent again with its de-duplication id; a flush is not", async () => {
  // A subject prefix engram does not serve, answered by this test: it drops the first two tries of every turn and
  // acknowledges the third, as a stream still being made and then made would; it never answers a flush.
  const prefix = `lostack${randomUUID().slice(0, 8)}`;
  const tenant = tenantOf("lostack");
  const nc = await connect({ servers });
  const seen: { subject: string; msgID: string | undefined }[] = [];
  const sub = nc.subscribe(`${prefix}.${tenant}.>`, {
    callback: (_err, msg) => {
      seen.push({ subject: msg.subject, msgID: msg.headers?.get("Nats-Msg-Id") });
      const tries = seen.filter((s) => s.subject === msg.subject).length;
      if (msg.subject.endsWith(".turns") && tries === 3) msg.respond(JSON.stringify({ stream: "S", seq: 7 }));
    },
  });
  await nc.flush();
  const memory = await MemoryClient.connect({ servers, tenant, prefix, timeoutMs: 300 });
  clients.push(memory);
  try {
    assert.equal(await memory.publishTurn(turn("c1", 1, "Ana", "hello")), 7);
    const turns = seen.filter((s) => s.subject.endsWith(".turns"));
    assert.equal(turns.length, 3);
    assert.ok(turns.every((s) => s.msgID === `${tenant}:c1:t1`), JSON.stringify(turns));
    const lost = await rejectsWith(memory.flush("c1"), "timeout");
    assert.ok(lost instanceof Timeout && !/tries/.test(lost.message), lost.message);
    assert.equal(seen.filter((s) => s.subject.endsWith(".flush")).length, 1);
  } finally {
    sub.unsubscribe();
    await nc.close();
  }
});
