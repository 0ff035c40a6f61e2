"""Every purpose's wire schema, as `shared.llm.schemas.response_format` sends it, is one that a real llama.cpp
server can build a grammar from: the request is answered and the server is still running after it."""
from typing import Any

import httpx
import pytest

from shared.llm.schemas import OUTPUTS, PURPOSES, Purpose, ResponseFormat, response_format
from tests.support.llama import ANY_SCHEMA, MODEL_ALIAS, LlamaServer, Servers, refusal

MESSAGES = [{"role": "system", "content": "Answer with one JSON object."}, {"role": "user", "content": "Hello."}]
MAX_TOKENS = 8  # the grammar is built before the first token; a few tokens prove the server could sample with it


def _ask(server: LlamaServer, wire: dict[str, Any] | None) -> httpx.Response:
    body: dict[str, Any] = {"model": MODEL_ALIAS, "messages": MESSAGES, "max_tokens": MAX_TOKENS, "temperature": 0}
    if wire is not None:
        body["response_format"] = wire
    return httpx.post(f"{server.url}/chat/completions", json=body, timeout=60)


@pytest.mark.parametrize("mode", ["json_object", "json_schema"])
@pytest.mark.parametrize("purpose", PURPOSES)
def test_the_server_builds_a_grammar_from_each_purposes_wire_schema(servers: Servers, purpose: Purpose,
                                                                    mode: ResponseFormat) -> None:
    """For every purpose and response format the server accepts, a real llama.cpp server answers a request carrying
    that purpose's wire schema and is still running afterwards."""
    refused = refusal(servers.live(), ANY_SCHEMA[mode])
    if refused is not None:  # llama-cpp-python's server knows only json_object (with a schema) and text
        pytest.skip(f"the server refuses response_format {mode} with any schema: {refused}")
    server = servers.live()
    try:
        reply = _ask(server, response_format(purpose, OUTPUTS[purpose], mode))
        failure = "" if reply.status_code == 200 else f"answered {reply.status_code} {reply.text[:500]}"
    except httpx.HTTPError as exc:  # the server died of the request (llama.cpp aborts on a grammar it cannot build)
        failure = f"no answer ({type(exc).__name__}: {exc})"
    assert not failure and server.alive(), (f"{purpose} ({mode}): {failure or 'answered'}; server alive: "
                                            f"{server.alive()}\n{server.log_tail()}")
    assert reply.json()["choices"][0]["message"]["content"] is not None
