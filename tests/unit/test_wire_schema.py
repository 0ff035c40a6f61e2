"""The schema sent as response_format keeps what grammar engines accept and drops what makes them explode, while
the pydantic model still validates the answer with every bound."""
from typing import Any

import pytest
from pydantic import Field, ValidationError

from shared.llm.schemas import (
    OUTPUTS,
    PURPOSES,
    WIRE_MAX_BOUND,
    CompressedWindow,
    ExtractedFacts,
    Output,
    Purpose,
    ResponseFormat,
    response_format,
    wire_schema,
)

HEAVY = {"maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}


def keywords(node: Any, named: bool = False) -> list[tuple[str, Any]]:
    """Every (keyword, value) in a schema, field and model names left out."""
    found: list[tuple[str, Any]] = []
    if isinstance(node, list):
        for item in node:
            found += keywords(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if not named:
                found.append((key, value))
            found += keywords(value, named=key in ("properties", "$defs") and not named)
    return found


def shape(node: Any) -> Any:
    """A schema's structure: properties, required keys, types, enums and references, nothing else."""
    if isinstance(node, list):
        return [shape(item) for item in node]
    if not isinstance(node, dict):
        return node
    keep = ("type", "properties", "$defs", "items", "anyOf", "required", "enum", "const", "$ref")
    return {k: ({n: shape(s) for n, s in v.items()} if k in ("properties", "$defs") else shape(v))
            for k, v in node.items() if k in keep}


@pytest.mark.parametrize("purpose", PURPOSES)
def test_the_wire_schema_has_the_models_structure_and_nothing_a_grammar_explodes_on(purpose: Purpose) -> None:
    """For every purpose, the wire schema keeps the model's structure (properties, required keys, types, enums,
    references) with no heavy keyword and no bound above WIRE_MAX_BOUND."""
    model = OUTPUTS[purpose]
    wire = wire_schema(model)
    used = keywords(wire)
    assert not {k for k, _ in used} & HEAVY, purpose
    assert all(v <= WIRE_MAX_BOUND for k, v in used if k in ("minItems", "maxItems", "minLength")), purpose
    assert shape(wire) == shape(model.model_json_schema())


def test_the_full_schema_had_the_bounds_that_break_llama_cpp() -> None:
    """What the wire schema leaves out was there: a maxLength of 2,000 and a pattern with `\\s`."""
    full = dict(keywords(CompressedWindow.model_json_schema()))
    assert full.get("maxLength", 0) > WIRE_MAX_BOUND
    assert any(k == "pattern" and "\\s" in v for k, v in keywords(ExtractedFacts.model_json_schema()))


def test_fields_named_like_keywords_are_kept() -> None:
    """Fields named like schema keywords (pattern, format) stay properties and required, while their own bounds are
    dropped."""
    class Odd(Output):
        pattern: str = Field(max_length=300)
        format: list[str] = Field(max_length=100)

    wire = wire_schema(Odd)
    assert set(wire["properties"]) == {"pattern", "format"} and set(wire["required"]) == {"pattern", "format"}
    assert wire["properties"]["pattern"] == {"title": "Pattern", "type": "string"}


def test_pydantic_still_enforces_what_the_wire_leaves_out() -> None:
    """The pydantic models still refuse an over-long statement text and an attribute breaking its pattern, bounds the
    wire schema leaves out."""
    statement = {"text": "x" * 2001, "source_turn_ids": ["t1"]}
    with pytest.raises(ValidationError):
        CompressedWindow.model_validate({"statements": [statement]})
    fact = {"subject": "Ana", "attribute": "Lives In", "value": "Porto", "text": "Ana lives in Porto.",
            "source_turn_id": "t1"}
    with pytest.raises(ValidationError):
        ExtractedFacts.model_validate({"facts": [fact]})


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "prompt"])
def test_each_response_format_carries_the_wire_schema(mode: ResponseFormat) -> None:
    """The json_schema and json_object modes send the wire schema (json_schema with strict off), and prompt mode sends
    no response_format."""
    sent = response_format("compress", CompressedWindow, mode)
    if mode == "json_schema":
        assert sent == {"type": "json_schema", "json_schema": {"name": "compress", "schema": wire_schema(
            CompressedWindow), "strict": False}}
    elif mode == "json_object":
        assert sent == {"type": "json_object", "schema": wire_schema(CompressedWindow)}
    else:
        assert sent is None
