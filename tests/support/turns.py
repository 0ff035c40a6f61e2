"""Valid turns with sensible defaults, one at a time or as a conversation."""
from datetime import UTC, datetime, timedelta

from engram_client.contract import Turn
from tests.support.ids import unique


def make_turn(text: str, *, conversation_id: str = "c1", turn_id: str | None = None, speaker: str = "Ana",
              ts: datetime | None = None, user_id: str | None = "u1", **extra: object) -> Turn:
    """A valid turn with sensible defaults."""
    return Turn(conversation_id=conversation_id, turn_id=turn_id or unique("t"), speaker=speaker, role="user",
                text=text, ts=ts or datetime(2023, 5, 8, 13, 56, tzinfo=UTC), user_id=user_id, **extra)


def conversation(lines: list[tuple[str, str]], conversation_id: str = "c1", start: datetime | None = None,
                 user_id: str = "u1") -> list[Turn]:
    """Turns from (speaker, text) pairs, a minute apart."""
    start = start or datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    return [make_turn(text, conversation_id=conversation_id, turn_id=f"{conversation_id}-{i}", speaker=speaker,
                      ts=start + timedelta(minutes=i), user_id=user_id) for i, (speaker, text) in enumerate(lines)]
