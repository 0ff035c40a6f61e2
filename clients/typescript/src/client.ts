/** MemoryClient: publish chat turns to engram, recall memories, inspect and forget them, over NATS. */
import { connect, errors, RequestError } from "@nats-io/transport-node";
import type { Msg, NatsConnection, NodeConnectionOptions, Subscription } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import type { JetStreamClient } from "@nats-io/jetstream";

import { InvalidRequest, Timeout, Unavailable, errorFromReply } from "./errors.js";
import type {
  ConsolidateRequest,
  ConsolidationSummary,
  EntriesForgotten,
  EntriesMerged,
  EntriesRequest,
  EntriesResponse,
  EntryCreated,
  EntrySuperseded,
  ErrorBody,
  Forget,
  ForgetResult,
  RecallRequest,
  RecallResponse,
  Turn,
} from "./generated/contract.js";

/** The tenant ids engram accepts (`dlq` is reserved for dead letters). */
export const TENANT_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** The header of an `unavailable` refusal that asks to be retried after that many milliseconds. */
export const RETRY_AFTER_HEADER = "Engram-Retry-After-Ms";
/** The longest wait between two tries of a request engram asked to retry. */
export const MAX_RETRY_WAIT_MS = 1_000;
/** How often a turn is sent (same de-duplication id) while its acknowledgement times out. */
export const PUBLISH_TRIES = 3;
/** How long engram's turns streams remember a de-duplication id: a turn sent again within it is stored once (the
 * Python client's `subjects.TURNS_DUPLICATE_WINDOW_S`, which engram's streams are made with). */
export const TURNS_DUPLICATE_WINDOW_MS = 120_000;
const DEEP_TIMEOUT_MS = 20_000; // a deep recall may take engram's deep and recall deadlines together (13 s)
const CONSOLIDATE_TIMEOUT_MS = 120_000;

/** The kinds of event engram publishes on `<prefix>.<tenant>.events.<kind>`. */
export type EventKind = "entry_created" | "entries_merged" | "entry_superseded" | "entries_forgotten";

/** One event, with its kind (the last token of its subject). */
export type EngramEvent =
  | { kind: "entry_created"; event: EntryCreated }
  | { kind: "entries_merged"; event: EntriesMerged }
  | { kind: "entry_superseded"; event: EntrySuperseded }
  | { kind: "entries_forgotten"; event: EntriesForgotten };

/** A reply as engram sent it: the decoded JSON object and the headers that matter. */
export interface RawReply {
  data: Record<string, unknown>;
  retryAfterMs: number | undefined;
}

/** How to reach engram. */
export interface ConnectOptions {
  /** NATS server URL(s), e.g. `nats://127.0.0.1:4222` (what `engram up` prints). */
  servers: string | string[];
  /** The tenant every call of this client is for. */
  tenant: string;
  /** The subject prefix engram runs with (ENGRAM_SUBJECT_PREFIX). */
  prefix?: string;
  /** Each request's and publish's timeout (default 10 s). */
  timeoutMs?: number;
  /** How long the first connect is tried before failing with Unavailable (default 10 s). */
  firstConnectTimeoutMs?: number;
  /** Anything else nats.js takes: credentials (`user`/`pass`, `token`, `authenticator`), `tls`, `inboxPrefix`. */
  nats?: Partial<NodeConnectionOptions>;
}

function validTenant(tenant: string): string {
  if (!TENANT_PATTERN.test(tenant)) {
    throw new InvalidRequest(`tenant id ${JSON.stringify(tenant)} does not match ${TENANT_PATTERN.source}`);
  }
  if (tenant === "dlq") {
    throw new InvalidRequest("tenant id 'dlq' is reserved for dead letters");
  }
  return tenant;
}

function isNoResponders(err: unknown): boolean {
  if (err instanceof RequestError && err.isNoResponders()) return true;
  if (err instanceof errors.NoRespondersError) return true;
  return err instanceof Error && err.cause !== undefined && err.cause !== err && isNoResponders(err.cause);
}

function isTimeout(err: unknown): boolean {
  if (err instanceof errors.TimeoutError) return true;
  return err instanceof Error && err.cause !== undefined && err.cause !== err && isTimeout(err.cause);
}

function retryHint(msg: Msg): number | undefined {
  const value = msg.headers?.get(RETRY_AFTER_HEADER) ?? "";
  return /^[0-9]+$/.test(value) ? Number(value) : undefined;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const encoder = new TextEncoder();

/** Publish turns, flush conversations, recall memories, inspect, forget and consolidate, for one tenant. */
export class MemoryClient {
  readonly tenant: string;
  readonly prefix: string;
  readonly timeoutMs: number;
  /** How many refusals with a retry hint this client waited out and asked again (for monitoring). */
  retried = 0;
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;

  constructor(nc: NatsConnection, tenant: string, options: { prefix?: string; timeoutMs?: number } = {}) {
    this.#nc = nc;
    this.#js = jetstream(nc);
    this.tenant = validTenant(tenant);
    this.prefix = options.prefix ?? "mem";
    this.timeoutMs = options.timeoutMs ?? 10_000;
  }

  /**
   * Connect to the NATS server engram listens on. The first connect is tried for `firstConnectTimeoutMs`, then
   * fails with Unavailable; once connected, the client reconnects for as long as it is open (a publish or request
   * fails with Timeout or Unavailable while NATS is away; nats.js has no bound on what it buffers meanwhile).
   */
  static async connect(options: ConnectOptions): Promise<MemoryClient> {
    const tenant = validTenant(options.tenant);
    const deadline = Date.now() + (options.firstConnectTimeoutMs ?? 10_000);
    let lastError: unknown;
    while (Date.now() < deadline) {
      try {
        const nc = await connect({
          servers: options.servers,
          name: `engram-client-${tenant}`,
          maxReconnectAttempts: -1,
          reconnectTimeWait: 1_000,
          timeout: Math.max(1, Math.min(2_000, deadline - Date.now())),
          ...options.nats,
        });
        return new MemoryClient(nc, tenant, { prefix: options.prefix, timeoutMs: options.timeoutMs });
      } catch (err) {
        lastError = err;
        await sleep(Math.min(250, Math.max(0, deadline - Date.now())));
      }
    }
    throw new Unavailable(`cannot connect to NATS at ${String(options.servers)}: ${String(lastError)}`, {
      cause: lastError,
    });
  }

  /** Send what is pending and disconnect. */
  async close(): Promise<void> {
    await this.#nc.drain();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #subject(kind: string): string {
    return `${this.prefix}.${this.tenant}.${kind}`;
  }

  /**
   * Publish and resolve to the stream's sequence. A message with a de-duplication id whose acknowledgement times out
   * is sent again (also while the client reconnects), up to PUBLISH_TRIES in all and only while the stream still
   * knows the id (TURNS_DUPLICATE_WINDOW_MS from the first send), so it is stored once whichever try arrives (a
   * tenant's first turn waits while engram makes its stream, which can outlast a timeout on a loaded cluster). A
   * flush is sent once.
   */
  async #publish(subject: string, payload: unknown, msgID?: string): Promise<number> {
    const tries = msgID === undefined ? 1 : PUBLISH_TRIES;
    const first = performance.now();
    for (let attempt = 1; ; attempt++) {
      try {
        const ack = await this.#js.publish(subject, JSON.stringify(payload), {
          timeout: this.timeoutMs,
          ...(msgID === undefined ? {} : { msgID }),
        });
        return ack.seq;
      } catch (err) {
        if (isNoResponders(err)) {
          throw new Unavailable(`no JetStream stream takes ${subject}; is engram's ingestor running?`, { cause: err });
        }
        if (isTimeout(err)) {
          const known = performance.now() - first + this.timeoutMs < TURNS_DUPLICATE_WINDOW_MS;
          if (attempt < tries && known && !this.#nc.isClosed()) continue;
          const tried = attempt === 1 ? "" : ` (${attempt} tries of ${this.timeoutMs} ms)`;
          throw new Timeout(`publishing to ${subject} timed out${tried}`, { cause: err });
        }
        throw new Unavailable(`cannot publish to ${subject} now: ${String(err)}`, { cause: err });
      }
    }
  }

  /** Publish a turn at least once (deduplicated by `<tenant>:<conversation_id>:<turn_id>`); resolves to its
   * sequence in the stream. */
  async publishTurn(turn: Turn): Promise<number> {
    return this.#publish(this.#subject("turns"), turn, `${this.tenant}:${turn.conversation_id}:${turn.turn_id}`);
  }

  /** Publish turns in order; resolves to their sequences. */
  async publishTurns(turns: Turn[]): Promise<number[]> {
    const seqs: number[] = [];
    for (const turn of turns) seqs.push(await this.publishTurn(turn));
    return seqs;
  }

  /** Close the conversation's open window (ordered after the turns published before it). */
  async flush(conversationId: string): Promise<number> {
    return this.#publish(this.#subject("flush"), { conversation_id: conversationId });
  }

  /** Send raw bytes to `<prefix>.<tenant>.<kind>` and return the decoded reply as it came (debugging, tests). */
  async rawRequest(kind: string, payload: string | Uint8Array, timeoutMs = this.timeoutMs): Promise<RawReply> {
    const subject = this.#subject(kind);
    let msg: Msg;
    try {
      msg = await this.#nc.request(subject, typeof payload === "string" ? encoder.encode(payload) : payload, {
        timeout: Math.max(1, timeoutMs),
      });
    } catch (err) {
      if (isNoResponders(err)) throw new Unavailable(`nobody answers ${subject}; is engram running?`, { cause: err });
      if (isTimeout(err)) throw new Timeout(`${subject} did not answer within ${timeoutMs} ms`, { cause: err });
      throw new Unavailable(`cannot send to ${subject} now: ${String(err)}`, { cause: err });
    }
    return { data: msg.json<Record<string, unknown>>(), retryAfterMs: retryHint(msg) };
  }

  /**
   * One request and its reply. When engram refuses with a retry hint (the tenant has its share of the workers in
   * flight), ask again after that long, doubling each time up to MAX_RETRY_WAIT_MS, with jitter, for as long as the
   * timeout leaves; then throw the refusal (its `retryAfterMs` says the hint).
   */
  async #request<R>(kind: string, request: object, timeoutMs = this.timeoutMs): Promise<R> {
    const deadline = Date.now() + timeoutMs;
    const payload = JSON.stringify(Object.fromEntries(Object.entries(request).filter(([, v]) => v != null)));
    for (let attempt = 0; ; attempt++) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Timeout(`${this.#subject(kind)} did not answer within ${timeoutMs} ms`);
      const reply = await this.rawRequest(kind, payload, left);
      const error = reply.data["error"] as ErrorBody | null | undefined;
      if (error == null) return reply.data as R;
      if (reply.retryAfterMs !== undefined) {
        const first = Math.max(1, reply.retryAfterMs);
        const wait = Math.min(MAX_RETRY_WAIT_MS, first * 2 ** Math.min(attempt, 16)) * (0.5 + Math.random());
        if (Date.now() + wait < deadline) {
          this.retried += 1;
          await sleep(wait);
          continue;
        }
      }
      throw errorFromReply(error, reply.retryAfterMs);
    }
  }

  /** The memories relevant to `query` (a string plus RecallRequest fields, or a whole RecallRequest). */
  async recall(query: string | RecallRequest, fields: Omit<RecallRequest, "query"> = {}): Promise<RecallResponse> {
    const request: RecallRequest = typeof query === "string" ? { ...fields, query } : query;
    const timeoutMs = request.mode === "deep" ? Math.max(this.timeoutMs, DEEP_TIMEOUT_MS) : this.timeoutMs;
    return this.#request<RecallResponse>("recall", request, timeoutMs);
  }

  /** List, get or trace stored entries (admin). */
  async entries(request: EntriesRequest = {}): Promise<EntriesResponse> {
    return this.#request<EntriesResponse>("entries", request);
  }

  /**
   * Delete everything engram holds of one user, one conversation or these entries, everywhere (entries of every
   * kind, working memory, turns still queued, dead letters). Resolves to the receipt (`verified`: a check
   * afterwards found nothing left).
   */
  async forget(subject: Pick<Forget, "user_id" | "conversation_id" | "entry_ids">): Promise<ForgetResult> {
    return this.#request<ForgetResult>("forget", subject);
  }

  /** Run the consolidation jobs (all, or `jobs`) for the tenant or one user now; resolves to what they changed. */
  async consolidate(request: ConsolidateRequest = {}, timeoutMs = CONSOLIDATE_TIMEOUT_MS): Promise<ConsolidationSummary> {
    return this.#request<ConsolidationSummary>("consolidate", request, timeoutMs);
  }

  /** Subscribe to this tenant's events (one kind, or all). At least once: de-duplicate on `event.event_id`. */
  events(kind?: EventKind): EventStream {
    return new EventStream(this.#nc.subscribe(this.#subject(`events.${kind ?? ">"}`)));
  }
}

/** The events of a subscription, as an async iterable; `close()` ends it. */
export class EventStream implements AsyncIterable<EngramEvent> {
  readonly #sub: Subscription;

  constructor(sub: Subscription) {
    this.#sub = sub;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<EngramEvent> {
    for await (const msg of this.#sub) {
      const kind = msg.subject.slice(msg.subject.lastIndexOf(".") + 1);
      yield { kind, event: msg.json() } as EngramEvent;
    }
  }

  /** Stop receiving (events already received are still yielded). */
  close(): void {
    this.#sub.unsubscribe();
  }
}

/** Publish each conversation's turns and flush it, as a chat product does at the end of a session. */
export async function publishSessions(client: MemoryClient, sessions: Turn[][]): Promise<void> {
  for (const turns of sessions) {
    const first = turns[0];
    if (first === undefined) continue;
    await client.publishTurns(turns);
    await client.flush(first.conversation_id);
  }
}

/** Wait until every turn is a source of some stored episode (flush the conversations first). */
export async function waitUntilStored(
  client: MemoryClient,
  turns: Turn[],
  { timeoutMs = 120_000, intervalMs = 500 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<void> {
  const pending = new Map<string, Set<string>>();
  for (const turn of turns) {
    const ids = pending.get(turn.conversation_id) ?? new Set<string>();
    ids.add(turn.turn_id);
    pending.set(turn.conversation_id, ids);
  }
  const deadline = Date.now() + timeoutMs;
  while (pending.size > 0) {
    for (const [conversationId, ids] of pending) {
      let cursor: string | null = null;
      do {
        const page: EntriesResponse = await client.entries({
          op: "list", conversation_id: conversationId, kind: "episodic", limit: 500, cursor,
        });
        for (const entry of page.entries) for (const id of entry.source_turn_ids) ids.delete(id);
        cursor = page.next_cursor;
      } while (cursor !== null && ids.size > 0);
      if (ids.size === 0) pending.delete(conversationId);
    }
    if (pending.size > 0) {
      if (Date.now() > deadline) {
        const missing = [...pending.values()].reduce((n, ids) => n + ids.size, 0);
        throw new Timeout(`${missing} turns in ${pending.size} conversations not stored after ${timeoutMs} ms`);
      }
      await sleep(intervalMs);
    }
  }
}
