"""A local HTTP server that speaks the OpenAI API (embeddings, chat completions): the only fake engram allows."""
import hashlib
import json
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def fake_vector(text: str, dims: int) -> list[float]:
    """A deterministic, unnormalised vector for a text (the server's 'model')."""
    digest = hashlib.sha256(text.encode()).digest()
    return [((digest[i % len(digest)] + i) % 17) - 8.0 + 0.5 for i in range(dims)]


@dataclass
class FakeOpenAI:
    """State of one fake server: what it received, and how it should misbehave."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail_with: int | None = None      # answer every request with this HTTP status
    chat_reply: Callable[[dict[str, Any]], str] = lambda body: "{}"

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = int(body.get("dimensions") or 8)
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dims)} for i, t in enumerate(texts)]
        data.reverse()  # the API does not promise order; clients must sort by index
        tokens = sum(len(t.split()) for t in texts)
        return {"object": "list", "data": data, "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": self.chat_reply(body)}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def _handler(state: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            state.requests.append({"path": self.path, "body": body})
            if state.fail_with is not None:
                self._send(state.fail_with, {"error": {"message": "injected failure", "type": "server_error"}})
            elif self.path.endswith("/embeddings"):
                self._send(200, state.embeddings(body))
            elif self.path.endswith("/chat/completions"):
                self._send(200, state.chat(body))
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@contextmanager
def serve() -> Iterator[FakeOpenAI]:
    """Run the fake on a free loopback port for the duration of the block."""
    state = FakeOpenAI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def norm(vector: list[float]) -> float:
    """Euclidean length."""
    return math.sqrt(sum(v * v for v in vector))
