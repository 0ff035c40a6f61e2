"""Asking the chat model for structured output: one place for the response format, validation and one repair
round, the tenant's token budget, the circuit breaker, the concurrency limit, backoff and the metrics.

Every caller has an offline path; when `ask` raises, the caller takes it and counts the fallback (`fell_back`).
"""
import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from engram_client.errors import EngramError
from shared.errors import LlmInvalid, LlmUnavailable
from shared.llm import prompts, schemas
from shared.llm.breaker import Breaker, TenantBreakers
from shared.llm.budget import TokenLedger
from shared.llm.schemas import Output, Purpose
from shared.llm.slots import TenantSlots
from shared.runtime import metrics
from shared.settings import Settings
from shared.text import patterns, tokens

if TYPE_CHECKING:  # the openai package (about 0.5 s of imports) loads when a model is configured, not before
    from openai import AsyncOpenAI

log = logging.getLogger("engram.llm")

T = TypeVar("T", bound=Output)
Check = Callable[[Any], str | None]  # a problem with a valid answer ("ids outside the window"), or None

_FENCE = patterns.compile(r"```(?:json)?\s*(\{.*?\})\s*```", patterns.DOTALL)
_THINKING = patterns.compile(r"<think>.*?</think>", patterns.DOTALL)  # reasoning models' scratchpad, braces and all
MESSAGE_TOKENS = 4  # what each message adds to the prompt besides its text, when a server reports no usage
MIN_CALL_S = 0.1    # a call with less time than this left before its caller's deadline is not made


def parse(content: str, schema: type[T]) -> T:
    """The answer as `schema`, from bare JSON, a fenced block, or the outermost braces of a chatty reply.

    Raises ValueError saying what is wrong, in words the repair round hands back to the model.
    """
    text = _THINKING.sub("", content).strip()
    if "{" not in text and "[" not in text:
        raise ValueError("the reply holds no JSON object")
    candidates = [text]
    candidates += [m.group(1) for m in _FENCE.finditer(text)]
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{"):text.rindex("}") + 1])
    problem = "the reply holds no JSON object"
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError as exc:
            problem = f"the reply is not valid JSON ({exc.msg} at character {exc.pos})"
            if "{" in candidate:  # prose after the object: read the first whole object
                try:
                    data, _ = json.JSONDecoder().raw_decode(candidate[candidate.index("{"):])
                except json.JSONDecodeError:
                    continue
            else:
                continue
        if not isinstance(data, dict):
            problem = "the reply is JSON but not an object"
            continue
        try:
            return schema.model_validate(data)
        except ValidationError as exc:
            problem = "the JSON does not match the schema: " + "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:5])
    raise ValueError(problem)


def fell_back(purpose: Purpose, exc: Exception) -> str:
    """Count and log that `purpose` took the offline path because of `exc`; returns the reason."""
    reason = getattr(exc, "reason", "error")
    metrics.llm_fallbacks_total.labels(purpose, reason).inc()
    log.warning("llm %s fell back to the offline path: %s (%s)", purpose, reason, exc)
    return str(reason)


class LlmClient:
    """The chat model behind `settings.llm_*`, shared by every purpose of one process.

    Args:
        client: an opened AsyncOpenAI (tests and callers that share one); by default one is made from settings.
    """

    def __init__(self, settings: Settings, client: "AsyncOpenAI | None" = None, ledger: TokenLedger | None = None,
                 breakers: TenantBreakers | None = None) -> None:
        from openai import AsyncOpenAI

        self.settings = settings
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "unused"
        self._client = client or AsyncOpenAI(base_url=settings.llm_base_url, api_key=key,
                                             timeout=settings.llm_timeout_s, max_retries=settings.llm_max_retries)
        self.ledger = ledger or TokenLedger(settings.llm_tokens_per_hour)
        # A tenant's failing calls open its own breaker; only failures of more than one tenant open the endpoint's.
        self.breakers = breakers or TenantBreakers(settings.llm_breaker_failures, settings.llm_breaker_cooldown_s)
        # One tenant holds at most half the slots, so that another's calls find one while its slow windows wait.
        self._slots = TenantSlots(settings.llm_max_concurrency, max(1, settings.llm_max_concurrency // 2))

    @property
    def breaker(self) -> Breaker:
        """The endpoint's breaker (open: every tenant's calls pause)."""
        return self.breakers.endpoint


    def _format(self, purpose: Purpose, schema: type[Output]) -> tuple[dict[str, Any] | None, str | None]:
        """The response_format to send and the schema to spell out in the prompt, per server kind.

        The prompt gets the full schema, bounds and patterns included: a server that constrains the answer gets the
        looser wire schema, which its grammar engine can build, and the model still reads the bounds.
        """
        mode = self.settings.llm_response_format
        wire = schemas.response_format(purpose, schema, mode)
        if mode == "json_schema":
            return wire, None
        return wire, json.dumps(schema.model_json_schema(), separators=(",", ":"))

    async def _call(self, tenant: str, purpose: Purpose, messages: list[dict[str, str]],
                    response_format: dict[str, Any] | None, timeout_s: float | None) -> str:
        from openai import APIConnectionError, APIError, APIStatusError, APITimeoutError, RateLimitError
        from openai.types.chat import ChatCompletion

        self.ledger.check(tenant)
        if timeout_s is not None and timeout_s < MIN_CALL_S:
            raise LlmUnavailable("deadline", "no time left before the caller's deadline")
        allowed, whose = self.breakers.allow(tenant)
        if not allowed:
            what = "the LLM endpoint" if whose == "endpoint" else f"tenant {tenant!r}'s calls to the LLM endpoint"
            raise LlmUnavailable("breaker_open", f"{what} failed repeatedly; they pause for "
                                                 f"{self.settings.llm_breaker_cooldown_s:g} s")
        client = self._client
        # A caller's deadline leaves no room for the client's own retries, and its timeouts say nothing about
        # the endpoint's health, so they never count against the breaker.
        deadline_bound = timeout_s is not None and timeout_s < self.settings.llm_timeout_s
        if timeout_s is not None:
            client = client.with_options(timeout=timeout_s, max_retries=0)
        extra: dict[str, Any] = {"response_format": response_format} if response_format else {}
        settled = False
        try:
            async with asyncio.timeout(timeout_s):  # waiting for a free slot counts against the deadline too
                async with self._slots.hold(tenant):
                    reply = await client.chat.completions.create(
                        model=self.settings.llm_model, messages=messages,  # type: ignore[arg-type]
                        temperature=0, max_tokens=self.settings.llm_max_output_tokens, **extra)
            settled = True
        except (APITimeoutError, TimeoutError) as exc:
            settled = True
            if deadline_bound:
                self.breakers.released(tenant)
            else:
                self.breakers.failed(tenant, timed_out=True)
            raise LlmUnavailable("timeout", f"the LLM endpoint did not answer in time ({exc})") from exc
        except RateLimitError as exc:
            settled = True
            self.breakers.failed(tenant)
            raise LlmUnavailable("rate_limited", "the LLM endpoint kept answering 429") from exc
        except APIConnectionError as exc:
            settled = True
            self.breakers.failed(tenant)
            raise LlmUnavailable("error", f"the LLM endpoint is unreachable ({exc})") from exc
        except APIStatusError as exc:
            settled = True
            if exc.status_code >= 500:
                self.breakers.failed(tenant)
            else:  # 4xx: this request was refused (too long, a format the server lacks); the endpoint is up
                self.breakers.released(tenant)
            raise LlmUnavailable("error", f"the LLM endpoint answered {exc.status_code}") from exc
        except APIError as exc:
            settled = True
            self.breakers.failed(tenant)
            raise LlmUnavailable("error", f"the LLM endpoint's answer could not be read ({exc})") from exc
        finally:
            if not settled:  # cancelled, or failed in a way that says nothing about the endpoint
                self.breakers.released(tenant)
        if not isinstance(reply, ChatCompletion):  # e.g. an HTML page from a proxy, with status 200
            self.breakers.failed(tenant)
            raise LlmUnavailable("error", f"the LLM endpoint answered something other than a chat completion "
                                          f"({type(reply).__name__})")
        self.breakers.succeeded(tenant)
        content = (reply.choices[0].message.content or "") if reply.choices else ""
        usage = reply.usage
        prompt = usage.prompt_tokens if usage else sum(
            tokens.count(m["content"], self.settings.tokenizer) + MESSAGE_TOKENS for m in messages)
        completion = usage.completion_tokens if usage else tokens.count(content, self.settings.tokenizer)
        metrics.llm_tokens_total.labels(purpose, "prompt").inc(prompt)
        metrics.llm_tokens_total.labels(purpose, "completion").inc(completion)
        self.ledger.spend(tenant, purpose, prompt + completion)
        # Per-tenant use, which metrics cannot carry (no tenant labels): one line per call.
        log.info("llm call tenant=%s purpose=%s prompt_tokens=%d completion_tokens=%d", tenant, purpose, prompt,
                 completion)
        return content

    async def ask(self, tenant: str, purpose: Purpose, document: str, schema: type[T], check: Check | None = None,
                  timeout_s: float | None = None) -> T:
        """The model's answer to `document`, validated as `schema` and by `check`, repaired once if need be.

        Raises LlmUnavailable (no answer: budget, breaker, timeout, 429s, outage) or LlmInvalid (answers that do
        not validate twice); the caller then takes its offline path.
        """
        started = time.perf_counter()
        response_format, hint = self._format(purpose, schema)
        messages = prompts.messages(purpose, document, hint)
        outcome = "error"
        try:
            for attempt in range(2):
                content = await self._call(tenant, purpose, messages, response_format,
                                           None if timeout_s is None else timeout_s - (time.perf_counter() - started))
                try:
                    answer = parse(content, schema)
                    problem = check(answer) if check else None
                except ValueError as exc:
                    problem = str(exc)
                if problem is None:
                    outcome = "ok" if attempt == 0 else "repaired"
                    return answer
                log.info("llm %s answer invalid (%s)%s", purpose, problem, "; asking again" if not attempt else "")
                messages = [*messages, {"role": "assistant", "content": content[:4000]},
                            {"role": "user", "content": f"That reply was invalid: {problem}. Answer the same "
                                                        "task again with only the corrected JSON object."}]
            outcome = "invalid"
            raise LlmInvalid(f"the LLM's {purpose} answer did not validate after a repair round: {problem}")
        except EngramError as exc:
            outcome = getattr(exc, "reason", outcome)
            raise
        except Exception as exc:  # never let an unexpected failure skip the caller's offline path
            outcome = "error"
            raise LlmUnavailable("error", f"asking the LLM failed ({type(exc).__name__}: {exc})") from exc
        finally:
            metrics.llm_calls_total.labels(purpose, outcome).inc()
            metrics.llm_seconds.labels(purpose).observe(time.perf_counter() - started)

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._client.close()


def open_llm(settings: Settings) -> LlmClient | None:
    """The configured chat model, or None (everything offline)."""
    return LlmClient(settings) if settings.llm_enabled else None
