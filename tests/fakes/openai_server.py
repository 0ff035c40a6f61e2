"""A local HTTP server that speaks the OpenAI API (embeddings, chat completions): the only fake engram allows."""
import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from shared.text import tokens
from tests.fakes import chat_model

ENCODING = "cl100k_base"
MESSAGE_TOKENS = 4  # what each message adds to a prompt besides its text


def fake_vector(text: str, dims: int) -> list[float]:
    """A deterministic, unnormalised vector for a text (the server's 'model')."""
    digest = hashlib.sha256(text.encode()).digest()
    return [((digest[i % len(digest)] + i) % 17) - 8.0 + 0.5 for i in range(dims)]


def _default_reply(body: dict[str, Any]) -> str:
    return chat_model.answer(body)


@dataclass
class FakeOpenAI:
    """State of one fake server: what it received, and how it should misbehave.

    Knobs (set them on the instance the `serve()` block yields; `reset()` puts them all back):
        chat_reply: the chat model; by default `chat_model.answer`, which derives its answer from the request.
        misbehave: chat answers are wrong in this way ("malformed", "wrong_schema", "foreign_ids", "junk"),
            repair rounds included; `misbehave_times` (counts down) limits it to the next N chat requests.
        delay_s: chat requests are answered this late (to trip client timeouts); with `slow_when`, only those whose
            messages hold that text (a model slow on some content, such as one tenant's long windows).
        fail_with: every request (embeddings too) gets this HTTP status; `fail_times` (counts down) limits it to
            the next N requests, and `retry_after` (seconds) is sent as a `retry-after` header with 429s.
    Readings: `requests` (path and body of each), `chat_calls`, and `tokens_served` (prompt plus completion
    tokens per task, as the `usage` of each answer reports them).
    """

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail_with: int | None = None      # answer every request with this HTTP status
    fail_times: int | None = None     # None: fail_with applies to every request; N: to the next N, then off
    retry_after: float | None = None  # seconds, sent as `retry-after` with injected 429s
    chat_reply: Callable[[dict[str, Any]], str] = _default_reply
    misbehave: chat_model.Misbehaviour | None = None
    misbehave_times: int | None = None  # None: every chat request misbehaves; N: the next N, then answers are right
    delay_s: float = 0.0
    slow_when: str | None = None
    chat_calls: int = 0
    tokens_served: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _closing: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def reset(self) -> None:
        """Back to a well-behaved server with nothing received: knobs off, counters and records cleared."""
        with self._lock:
            self.fail_with = self.fail_times = self.retry_after = None
            self.misbehave = self.misbehave_times = None
            self.chat_reply = _default_reply
            self.delay_s = 0.0
            self.slow_when = None
            self.chat_calls = 0
            self.requests.clear()
            self.tokens_served.clear()

    def received(self, path: str, body: dict[str, Any]) -> None:
        """Record a request (and count it if it is a chat request)."""
        with self._lock:
            self.requests.append({"path": path, "body": body})
            if path.endswith("/chat/completions"):
                self.chat_calls += 1

    def injected_failure(self) -> int | None:
        """The status to fail this request with, if any (spends one of `fail_times`)."""
        with self._lock:
            if self.fail_with is None or self.fail_times == 0:
                return None
            if self.fail_times is not None:
                self.fail_times -= 1
            return self.fail_with

    def _misbehaviour(self) -> chat_model.Misbehaviour | None:
        with self._lock:
            if self.misbehave is None or self.misbehave_times == 0:
                return None
            if self.misbehave_times is not None:
                self.misbehave_times -= 1
            return self.misbehave

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        """An embeddings response: one deterministic vector per input, in shuffled order."""
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = int(body.get("dimensions") or 8)
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dims)} for i, t in enumerate(texts)]
        data.reverse()  # the API does not promise order; clients must sort by index
        tokens = sum(len(t.split()) for t in texts)
        return {"object": "list", "data": data, "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """A chat completion: the model's (or a misbehaving) answer, cut at `max_tokens`, with real token usage."""
        slow = self.slow_when is None or self.slow_when in json.dumps(body.get("messages", []), ensure_ascii=False)
        if self.delay_s > 0 and slow:
            self._closing.wait(self.delay_s)  # a server that is shutting down stops waiting
        how = self._misbehaviour()
        content = chat_model.misbehave(body, how) if how else self.chat_reply(body)
        finish = "stop"
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if limit and tokens.count(content, ENCODING) > int(limit):
            content, finish = tokens.truncate(content, int(limit), ENCODING), "length"
        messages = body.get("messages") or []
        prompt = sum(tokens.count(chat_model.text_of(m.get("content")), ENCODING) + MESSAGE_TOKENS
                     for m in messages)
        completion = tokens.count(content, ENCODING)
        doc = chat_model.task_document(body)
        task = str(doc["task"]) if doc else "other"
        with self._lock:
            self.tokens_served[task] = self.tokens_served.get(task, 0) + prompt + completion
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                             "message": {"role": "assistant", "content": content, "refusal": None}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}}


def _handler(state: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            state.received(self.path, body)
            status = state.injected_failure()
            if status == 429:
                headers = {} if state.retry_after is None else {"retry-after": f"{state.retry_after:g}"}
                self._send(429, {"error": {"message": "Rate limit reached", "type": "requests",
                                           "code": "rate_limit_exceeded", "param": None}}, headers)
            elif status is not None:
                self._send(status, {"error": {"message": "injected failure", "type": "server_error"}})
            elif self.path.endswith("/embeddings"):
                self._send(200, state.embeddings(body))
            elif self.path.endswith("/chat/completions"):
                try:
                    reply = state.chat(body)
                except Exception as exc:  # a bug in the fake is a 500 the test sees, not a hung connection
                    self._send(500, {"error": {"message": f"fake model failed: {exc!r}", "type": "server_error"}})
                else:
                    self._send(200, reply)
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            raw = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

    return Handler


@contextmanager
def serve(port: int = 0) -> Iterator[FakeOpenAI]:
    """Run the fake on a loopback port (a free one by default) for the duration of the block."""
    state = FakeOpenAI()
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state._closing.set()
        server.shutdown()
        server.server_close()
        thread.join()


def norm(vector: list[float]) -> float:
    """Euclidean length."""
    return math.sqrt(sum(v * v for v in vector))


def main() -> None:
    """`python -m tests.fakes.openai_server [port]`: serve until interrupted, printing the URL and, on exit, the
    tokens served per purpose (how `engram eval locomo` is run against the fake to count what a model would cost)."""
    import sys
    import time as clock

    with serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0) as state:
        print(f"fake OpenAI API at {state.url}", flush=True)
        try:
            while True:
                clock.sleep(3600)
        except KeyboardInterrupt:
            pass
        print(f"chat calls {state.chat_calls}; tokens served by purpose {dict(sorted(state.tokens_served.items()))}",
              flush=True)


if __name__ == "__main__":
    main()
