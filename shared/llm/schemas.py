"""What the model is asked to return, per purpose: pydantic models that validate whatever comes back (the model's
word is never trusted unvalidated), and the looser JSON schema of each that goes on the wire."""
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

from shared.text import patterns

Purpose = Literal["compress", "facts", "summary", "plan", "reflect", "consolidate"]
ResponseFormat = Literal["json_schema", "json_object", "prompt"]
PURPOSES: tuple[Purpose, ...] = ("compress", "facts", "summary", "plan", "reflect", "consolidate")

MAX_STATEMENTS = 12   # per window: more would be a restatement of every word, not a compression
MAX_SUB_QUERIES = 4   # per plan or reflection round


_DATE = patterns.compile(r"^\d{4}-\d{2}-\d{2}$")


def _lenient_time(value: Any) -> Any:
    """Models write "2023-05-01" or a time without a zone as often as a full ISO 8601 time: read them as UTC."""
    if isinstance(value, str):
        text = value.strip()
        if not text or text.lower() in ("null", "none", "unknown"):
            return None
        if _DATE.match(text):
            return f"{text}T00:00:00+00:00"
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return value
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return value


When = Annotated[AwareDatetime | None, BeforeValidator(_lenient_time)]


class Output(BaseModel):
    """Base of every model answer: unknown fields are ignored (models add them), types are checked."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class Statement(Output):
    """One self-contained statement of a window: no pronouns, absolute dates, who and what it names."""

    text: str = Field(min_length=1, max_length=2000)
    source_turn_ids: list[str] = Field(min_length=1, max_length=64)
    persons: list[str] = Field(default_factory=list, max_length=32)
    entities: list[str] = Field(default_factory=list, max_length=32)
    keywords: list[str] = Field(default_factory=list, max_length=32)
    location: str | None = Field(default=None, max_length=200)
    topic: str | None = Field(default=None, max_length=200)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    occurred_at: When = None  # when what it states happened, if the turns say (else the writer uses the turn's time)


class CompressedWindow(Output):
    """A window of turns restated as statements (purpose `compress`)."""

    statements: list[Statement] = Field(max_length=MAX_STATEMENTS)


class ExtractedFact(Output):
    """One fact about a person (purpose `facts`): its slot, a sentence stating it, and the turn that says it."""

    subject: str = Field(min_length=1, max_length=200)
    attribute: str = Field(pattern=r"^[a-z_]{2,32}(:[^\s:][^:\n]{0,80}){0,2}$")
    value: str = Field(min_length=1, max_length=300)
    text: str = Field(min_length=1, max_length=1000)
    source_turn_id: str = Field(min_length=1)


class ExtractedFacts(Output):
    """Facts a window's turns state about the people in them."""

    facts: list[ExtractedFact] = Field(max_length=MAX_STATEMENTS)


class Summary(Output):
    """A running summary of a conversation's older turns (purpose `summary`)."""

    summary: str = Field(min_length=1, max_length=8000)


class SubQuery(Output):
    """One targeted search of a deep recall's plan."""

    query: str = Field(min_length=1, max_length=500)
    keywords: list[str] = Field(default_factory=list, max_length=16)
    persons: list[str] = Field(default_factory=list, max_length=8)
    since: When = None
    until: When = None
    why: str = Field(default="", max_length=300)


class SearchPlan(Output):
    """Sub-queries a question needs (purpose `plan`)."""

    queries: list[SubQuery] = Field(min_length=1, max_length=MAX_SUB_QUERIES)


class Reflection(Output):
    """Whether the memories found answer the question, and what to search for if not (purpose `reflect`)."""

    sufficient: bool
    missing: list[SubQuery] = Field(default_factory=list, max_length=MAX_SUB_QUERIES)


class SameFactGroups(Output):
    """Which of the given statements state the same fact about the same person (purpose `consolidate`)."""

    groups: list[list[str]] = Field(max_length=64)  # required: a reply without it is no answer, not "none"


OUTPUTS: dict[Purpose, type[Output]] = {"compress": CompressedWindow, "facts": ExtractedFacts, "summary": Summary,
                                        "plan": SearchPlan, "reflect": Reflection, "consolidate": SameFactGroups}

# Keywords a grammar engine turns into rules by repetition or by a regular expression: llama.cpp (its server and
# llama-cpp-python's), Ollama and vLLM build a grammar from the schema, and a maxLength of 2,000 becomes 2,000
# nested optional characters, which llama.cpp refuses ("exceeds sane defaults") and a pattern with `\s` is an
# escape its grammar parser does not know (both seen killing llama-cpp-python's server). Pydantic validates them
# on the answer instead, and the prompts say them in words.
_GRAMMAR_HEAVY = frozenset({"maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                            "exclusiveMaximum", "multipleOf"})
_BOUNDS = frozenset({"minItems", "maxItems", "minLength"})
WIRE_MAX_BOUND = 16  # these bounds up to 16 stay (they keep a small model's lists short and its strings non-empty)
_NAMED = ("properties", "$defs")  # their keys are field and model names, never keywords


def _loosened(node: Any) -> Any:
    if isinstance(node, list):
        return [_loosened(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _GRAMMAR_HEAVY or (key in _BOUNDS and value > WIRE_MAX_BOUND):
            continue
        out[key] = ({name: _loosened(sub) for name, sub in value.items()} if key in _NAMED and isinstance(value, dict)
                    else _loosened(value))
    return out


def wire_schema(schema: type[Output]) -> dict[str, Any]:
    """`schema`'s JSON schema as grammar engines accept it: structure, types, enums, required keys and small bounds
    (list lengths, minimum string lengths); no maximum string lengths, patterns, formats, number ranges or long
    list bounds."""
    loosened: dict[str, Any] = _loosened(schema.model_json_schema())
    return loosened


def response_format(purpose: Purpose, schema: type[Output], mode: ResponseFormat) -> dict[str, Any] | None:
    """The `response_format` of a request for `purpose` in the server's mode (None: the server gets none)."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": purpose, "schema": wire_schema(schema),
                                                       "strict": False}}
    if mode == "json_object":  # llama.cpp's server constrains to `schema`; other servers ignore it
        return {"type": "json_object", "schema": wire_schema(schema)}
    return None
