"""A JSON Schema per message of the contract, from the pydantic models, with what pydantic cannot see added."""
import json
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema
from pydantic_core import core_schema

from services.contract.messages import (
    ERROR_CLASSES,
    HEADER_MODELS,
    RESERVED_TENANT,
    RETRY_AFTER_HEADER,
    SCHEMA_VERSION,
    TENANT_PATTERN,
    messages,
)

REF = "#/components/schemas/{model}"


class _ContractSchema(GenerateJsonSchema):
    """Pydantic's JSON Schema, with what pydantic cannot see of the models: every field of a message engram sends
    is always present (it serializes them all), and `schema_version` takes one value."""

    def field_is_required(self, field: core_schema.ModelField | core_schema.DataclassField
                          | core_schema.TypedDictField, total: bool) -> bool:
        """In what engram sends every field is there, defaults included."""
        if self.mode == "serialization":
            return not field.get("serialization_exclude")
        return super().field_is_required(field, total)


def _fix(node: Any) -> Any:
    """Hand-written refinements of a schema that validators (not types) enforce in the models."""
    if isinstance(node, dict):
        fixed = {key: _fix(value) for key, value in node.items()}
        props = fixed.get("properties")
        if isinstance(props, dict) and "schema_version" in props:
            props["schema_version"] = {"const": SCHEMA_VERSION, "default": SCHEMA_VERSION, "title": "Schema Version",
                                       "type": "integer", "description": "the contract version; another is refused"}
        if fixed.get("pattern") == TENANT_PATTERN:
            fixed["not"] = {"const": RESERVED_TENANT}
            fixed["description"] = f"a tenant id; `{RESERVED_TENANT}` is reserved for dead letters"
        return fixed
    if isinstance(node, list):
        return [_fix(item) for item in node]
    return node


def components() -> dict[str, dict[str, Any]]:
    """Every schema the contract uses, by name, with refs into `#/components/schemas/`.

    A model that reads differently when engram receives it and when it sends it (a Turn published, a Turn in a
    recall's working memory) gets `<Name>` for the first and `<Name>Output` for the second.
    """
    wanted: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (m.model, "validation" if m.direction == "in" else "serialization") for m in messages()]
    wanted += [(model, "validation") for model in HEADER_MODELS]
    _, top = models_json_schema(wanted, ref_template=REF, schema_generator=_ContractSchema)
    defs: dict[str, dict[str, Any]] = top["$defs"]
    renames = {name: name.replace("-Input", "").replace("-Output", "Output") for name in defs}
    text = json.dumps(defs)
    for old, new in renames.items():
        text = text.replace(json.dumps(REF.format(model=old)), json.dumps(REF.format(model=new)))
    renamed: dict[str, dict[str, Any]] = {renames[name]: schema for name, schema in json.loads(text).items()}
    for name, schema in renamed.items():
        schema["title"] = name
    out = {name: _fix(renamed[name]) for name in sorted(renamed)}
    out["ErrorBody"]["properties"]["code"]["description"] = _codes_description()
    return out


def _codes_description() -> str:
    """What each wire code means and whether a retry can help, from the error classes themselves."""
    lines = ["The wire error code:"]
    for error in ERROR_CLASSES:
        doc = (error.__doc__ or "").strip().splitlines()[0]
        what = doc.rstrip(".") if error.code != "internal" else "anything else that failed (the service logged it)"
        lines.append(f"- `{error.code}`: {what}{'; worth retrying' if error.retryable else ''}.")
    lines.append(f"An `unavailable` reply carrying `{RETRY_AFTER_HEADER}` asks to be retried after that many ms.")
    return "\n".join(lines)


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref.rsplit("/", 1)[-1]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def json_schemas() -> dict[str, dict[str, Any]]:
    """A self-contained JSON Schema (2020-12) per message and per header set, by file name."""
    defs = components()
    out: dict[str, dict[str, Any]] = {}
    for name in [m.name for m in messages()] + [str(h.model_config["title"]) for h in HEADER_MODELS]:
        needed: list[str] = []
        todo = list(_refs(defs[name]))
        while todo:
            ref = todo.pop()
            if ref not in needed and ref != name:
                needed.append(ref)
                todo.extend(_refs(defs[ref]))
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **defs[name]}
        if needed:
            schema["$defs"] = {ref: defs[ref] for ref in sorted(needed)}
        text = json.dumps(schema).replace('"#/components/schemas/', '"#/$defs/')
        out[f"{name}.json"] = json.loads(text)
    return out
