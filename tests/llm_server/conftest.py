"""Fixtures of the real-server check: llama-cpp-python's server with SmolLM2-135M-Instruct (tests/support/llama.py)."""
from collections.abc import Iterator

import pytest

from tests.support.llama import Servers, require_venv


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """The module's llama.cpp server (skips, or fails under `make test`, when .venv-llm is not prepared)."""
    held = Servers(require_venv(), tmp_path_factory.mktemp("llama"))
    try:
        yield held
    finally:
        held.stop()
