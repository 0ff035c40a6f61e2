"""What chat products publish: turns and the flush that closes a conversation's window."""
from typing import Annotated, Literal

from pydantic import AfterValidator, AwareDatetime, Field

from engram_client.contract.base import Id, MetadataValue, Name, TenantScoped, Text, bounded_metadata

Role = Literal["user", "assistant", "system", "other"]


class Turn(TenantScoped):
    """One chat turn, published to `<prefix>.<tenant>.turns`."""

    conversation_id: Id
    turn_id: Id
    speaker: Name
    role: Role
    text: Text
    ts: AwareDatetime
    user_id: Id | None = None
    agent_id: Id | None = None
    metadata: Annotated[dict[str, MetadataValue], AfterValidator(bounded_metadata)] = Field(default_factory=dict)

    def msg_id(self, tenant: str) -> str:
        """The JetStream dedup id: `<tenant>:<conversation_id>:<turn_id>`."""
        return f"{tenant}:{self.conversation_id}:{self.turn_id}"


class Flush(TenantScoped):
    """Closes the open window of one conversation, ordered after the turns it closes."""

    conversation_id: Id


