"""Windows: consecutive turns of one conversation that are compressed together."""
from collections.abc import Sequence

from engram_client.contract import Turn
from shared.compress import Window


def split(tenant: str, turns: Sequence[Turn], size: int, context_turns: int = 1) -> list[Window]:
    """Cut one conversation's turns (in order) into windows of `size`, each quoting the turns before it."""
    if not turns:
        return []
    conversation = turns[0].conversation_id
    if any(t.conversation_id != conversation for t in turns):
        raise ValueError("split takes the turns of one conversation")
    out = []
    for start in range(0, len(turns), size):
        out.append(Window(tenant_id=tenant, conversation_id=conversation, turns=list(turns[start:start + size]),
                          context=list(turns[max(0, start - context_turns):start])))
    return out
