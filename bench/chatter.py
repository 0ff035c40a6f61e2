"""Synthetic short chat turns (with relative times, names and places) that load the ingest path during a benchmark."""
import random
from datetime import UTC, datetime, timedelta

from engram_client.contract import Turn

_NAMES = ["Ana", "Bo", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal"]
_PLACES = ["Lisbon", "Porto", "the gym", "the office", "Luigi's", "the park", "the lake", "Berlin"]
_ACTS = ["had lunch at", "went running at", "met a friend at", "bought a lamp in", "lost my keys at",
         "took photos at", "read a book at", "played chess at"]
_WHEN = ["yesterday", "last Saturday", "this morning", "two days ago", "last week", "today", "tomorrow",
         "next Friday"]


def sessions(turns: int, conversations: int, user_id: str, seed: int = 5) -> list[list[Turn]]:
    """`turns` short turns of one user, spread over `conversations` conversations (a session each)."""
    rng = random.Random(seed)
    start = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
    per = max(1, turns // conversations)
    out = []
    for c in range(conversations):
        out.append([Turn(conversation_id=f"{user_id}-{c}", turn_id=f"{user_id}-{c}-{i}",
                         speaker=_NAMES[(i % 2 + c) % len(_NAMES)], role="user",
                         text=f"I {rng.choice(_ACTS)} {rng.choice(_PLACES)} {rng.choice(_WHEN)}.",
                         ts=start + timedelta(minutes=c * 100 + i), user_id=user_id) for i in range(per)])
    return out
