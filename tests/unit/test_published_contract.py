"""The published contract (contract/: JSON Schemas, AsyncAPI; clients/typescript's generated types) is what the
pydantic models give now, the AsyncAPI initiative's own parser accepts the document, and tsc accepts the types."""
import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from services import contract
from services.cli import app
from tests.support.node import CONTRACT, run_node


def test_the_committed_contract_is_what_the_models_give() -> None:
    """Regenerated from the models, every committed schema and the AsyncAPI document are the same, byte for byte."""
    stale = contract.differences(CONTRACT)
    assert not stale, f"{stale} differ from the models: run `make contract` and commit the result"


def test_engram_contract_writes_the_files_and_check_finds_a_stale_one(tmp_path: Path) -> None:
    """`engram contract --out` writes what is committed; `--check` passes on it, and fails once a file changes."""
    runner = CliRunner()
    assert runner.invoke(app, ["contract", "--out", str(tmp_path)]).exit_code == 0
    assert (tmp_path / "asyncapi.yaml").read_text() == (CONTRACT / "asyncapi.yaml").read_text()
    assert runner.invoke(app, ["contract", "--out", str(tmp_path), "--check"]).exit_code == 0
    (tmp_path / "schemas" / "Turn.json").write_text("{}")
    stale = runner.invoke(app, ["contract", "--out", str(tmp_path), "--check"])
    assert stale.exit_code == 1 and "Turn.json" in stale.output, stale.output


def test_the_committed_typescript_types_are_what_the_schemas_give() -> None:
    """The committed TypeScript types are exactly what the generator produces from the committed JSON Schemas."""
    done = run_node("scripts/generate-types.mjs", "--check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_asyncapi_parser_accepts_the_document_and_rejects_a_broken_copy(tmp_path: Path) -> None:
    """@asyncapi/parser (the parser of the AsyncAPI CLI and Studio) reports no error on the document, and does on a
    copy whose recall operation names a message that does not exist (so the check can fail)."""
    document = yaml.safe_load((CONTRACT / contract.ASYNCAPI_FILE).read_text())
    document["operations"]["recall"]["messages"] = [{"$ref": "#/channels/recall/messages/Nothing"}]
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(document))
    done = run_node("scripts/validate-asyncapi.mjs", str(CONTRACT / contract.ASYNCAPI_FILE), str(broken))
    assert f"VALID: {CONTRACT / contract.ASYNCAPI_FILE}:" in done.stdout, done.stdout + done.stderr
    assert f"INVALID: {broken}:" in done.stdout and done.returncode == 1, done.stdout + done.stderr


def test_tsc_accepts_the_client_and_the_generated_types() -> None:
    """tsc type-checks the TypeScript client and its generated types without an error."""
    done = run_node("node_modules/typescript/bin/tsc", "--noEmit", "-p", "tsconfig.json", timeout_s=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_message_and_error_code_is_published() -> None:
    """Requests, replies, events and headers each have a schema; the error codes are the ones errors.py defines."""
    names = {p.stem for p in (CONTRACT / "schemas").glob("*.json")}
    assert {"Turn", "Flush", "RecallRequest", "RecallResponse", "EntriesRequest", "EntriesResponse", "Forget",
            "ForgetResult", "ConsolidateRequest", "ConsolidationSummary", "ErrorReply", "EntryCreated",
            "EntriesMerged", "EntrySuperseded", "EntriesForgotten", "TurnHeaders", "ReplyHeaders",
            "DeadLetterHeaders"} <= names
    error = json.loads((CONTRACT / "schemas" / "ErrorReply.json").read_text())["$defs"]["ErrorBody"]
    assert error["properties"]["code"]["enum"] == ["invalid_request", "forbidden", "not_found", "unavailable",
                                                   "timeout", "internal"]
    document = yaml.safe_load((CONTRACT / contract.ASYNCAPI_FILE).read_text())
    assert document["operations"]["recall"]["reply"]["channel"] == {"$ref": "#/channels/recallReply"}
    assert document["operations"]["recall"]["bindings"]["nats"]["queue"] == "retriever"
    assert "Nats-Msg-Id" in document["components"]["schemas"]["TurnHeaders"]["properties"]
    assert "Engram-Retry-After-Ms" in document["components"]["schemas"]["ReplyHeaders"]["properties"]
    assert document["channels"]["turns"]["x-jetstream"]["stream"] == "MEM_TURNS_{tenant}"
