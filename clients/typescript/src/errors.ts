/** Errors with engram's wire codes: every failure of a request becomes one of these. */
import type { ErrorBody } from "./generated/contract.js";

/** The wire error codes of the contract (ErrorBody.code). */
export type ErrorCode = ErrorBody["code"];

/** The error codes, in the contract's order. */
export const ERROR_CODES: readonly ErrorCode[] = [
  "invalid_request",
  "forbidden",
  "not_found",
  "unavailable",
  "timeout",
  "internal",
];

/** Root of every error the client raises on engram's behalf: `code` is the wire code. */
export class EngramError extends Error {
  readonly code: ErrorCode;
  /** Whether asking again later may succeed (`unavailable`, `timeout`). */
  readonly retryable: boolean;
  /** On an `unavailable` refusal: engram's retry hint (Engram-Retry-After-Ms), when it sent one. */
  readonly retryAfterMs: number | undefined;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; retryAfterMs?: number }) {
    super(`${code}: ${message}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = code === "unavailable" || code === "timeout";
    this.retryAfterMs = options?.retryAfterMs;
  }
}

/** The input cannot be processed as given; sending it unchanged fails again. */
export class InvalidRequest extends EngramError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("invalid_request", message, options);
  }
}

/** The caller may not do this, e.g. a payload naming another tenant than its subject. */
export class Forbidden extends EngramError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("forbidden", message, options);
  }
}

/** The named entry, conversation or user does not exist for this tenant. */
export class NotFound extends EngramError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("not_found", message, options);
  }
}

/** engram or one of its dependencies cannot answer now; ask again later. */
export class Unavailable extends EngramError {
  constructor(message: string, options?: { cause?: unknown; retryAfterMs?: number }) {
    super("unavailable", message, options);
  }
}

/** No answer in time. */
export class Timeout extends EngramError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("timeout", message, options);
  }
}

/** engram failed in a way it did not expect (it logged the details). */
export class InternalError extends EngramError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("internal", message, options);
  }
}

/** The error a client raises for an `error{code, message}` reply (an unknown code counts as `internal`). */
export function errorFromReply(body: ErrorBody, retryAfterMs?: number): EngramError {
  switch (body.code) {
    case "invalid_request":
      return new InvalidRequest(body.message);
    case "forbidden":
      return new Forbidden(body.message);
    case "not_found":
      return new NotFound(body.message);
    case "unavailable":
      return new Unavailable(body.message, retryAfterMs === undefined ? undefined : { retryAfterMs });
    case "timeout":
      return new Timeout(body.message);
    default:
      return new InternalError(body.message);
  }
}
