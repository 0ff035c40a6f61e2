"""Files `engram ingest` reads: JSONL (one Turn per line) or a LoCoMo conversation (one conversation per session)."""
import json
from pathlib import Path

from pydantic import ValidationError

from engram_client.contract import Turn
from engram_client.errors import InvalidRequest
from shared.evaluation import locomo


def read_turns(path: Path) -> list[Turn]:
    """Every turn in the file, in file order; a bad line is reported with its number."""
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("{") and '"speaker_a"' in stripped[:200_000] and "\n{" not in stripped.strip():
        return locomo.load(path).turns
    turns = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            turns.append(Turn.model_validate_json(line))
        except (ValidationError, json.JSONDecodeError) as exc:
            raise InvalidRequest(f"{path}:{number}: not a valid turn: {exc}") from exc
    return turns
