/** @engram/client: engram's TypeScript client (over the official NATS client), with the contract's types. */
export {
  MemoryClient,
  EventStream,
  publishSessions,
  waitUntilStored,
  MAX_RETRY_WAIT_MS,
  RETRY_AFTER_HEADER,
  TENANT_PATTERN,
} from "./client.js";
export type { ConnectOptions, EngramEvent, EventKind, RawReply } from "./client.js";
export {
  ERROR_CODES,
  EngramError,
  Forbidden,
  InternalError,
  InvalidRequest,
  NotFound,
  Timeout,
  Unavailable,
  errorFromReply,
} from "./errors.js";
export type { ErrorCode } from "./errors.js";
export type * from "./generated/contract.js";
