"""Fixtures of the real-server check: llama-cpp-python's server with SmolLM2-135M-Instruct (see server.py)."""
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm_server.server import LlamaServer, require_venv, start


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


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """The module's llama.cpp server (skips, or fails under `make test`, when .venv-llm is not prepared)."""
    held = Servers(require_venv(), tmp_path_factory.mktemp("llama"))
    try:
        yield held
    finally:
        held.stop()
