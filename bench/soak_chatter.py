"""Synthetic chat for the soak: tenants, users and their conversations, turn by turn, with facts now and then."""
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime

from engram_client.contract import Turn

_NAMES = ["Ana", "Bo", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Lu"]
_PLACES = ["Lisbon", "Porto", "the gym", "the office", "Luigi's", "the park", "the lake", "Berlin", "the market",
           "the library", "Madrid", "the beach"]
_ACTS = ["had lunch at", "went running at", "met a friend at", "bought a lamp in", "lost my keys at",
         "took photos at", "read a book at", "played chess at", "walked the dog at", "waited for hours at"]
_WHEN = ["yesterday", "last Saturday", "this morning", "two days ago", "last week", "today", "tomorrow",
         "next Friday"]
_FOODS = ["sushi", "pasta", "tacos", "curry", "ramen", "salad"]
_REPLIES = ["That sounds nice, tell me more.", "Oh no, what happened next?", "Got it, I will remember that.",
            "How did that go?", "Nice! Who was with you?", "Thanks for sharing that."]
RETELL = 0.3  # share of new conversations that retell an earlier one
_QUERIES = ["Where did I have lunch?", "Who did I meet at the park?", "What food do I like?", "Where do I live?",
            "What did I do last Saturday?", "Where did I lose my keys?", "What are my plans for next Friday?",
            "Did I go running this week?"]


def query(rng: random.Random) -> str:
    """A recall question of the kind a product asks about its user."""
    return rng.choice(_QUERIES)


def _user_line(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.08:
        return f"I live in {rng.choice(_PLACES[:8])} now."
    if roll < 0.16:
        return f"My favourite food is {rng.choice(_FOODS)}."
    if roll < 0.24:
        return f"I will meet {rng.choice(_NAMES)} at {rng.choice(_PLACES)} {rng.choice(_WHEN[-2:])}."
    return f"I {rng.choice(_ACTS)} {rng.choice(_PLACES)} {rng.choice(_WHEN)} with {rng.choice(_NAMES)}."


@dataclass
class Conversation:
    """One conversation of a user: a session of `length` turns, alternately the user's and the assistant's."""

    tenant: str
    user_id: str
    conversation_id: str
    speaker: str
    length: int
    script: list[str] = field(default_factory=list)  # a retelling: the lines of an earlier conversation
    sent: int = 0
    said: list[str] = field(default_factory=list)    # the lines so far

    @property
    def done(self) -> bool:
        """Whether every turn of the session has been produced (time to flush)."""
        return self.sent >= self.length

    def next_turn(self, rng: random.Random) -> Turn:
        """The next turn, stamped now (so retention sees a live conversation, not an old one)."""
        mine = self.sent % 2 == 0
        if self.sent < len(self.script):
            text = self.script[self.sent]
        else:
            text = _user_line(rng) if mine else rng.choice(_REPLIES)
        self.said.append(text)
        turn = Turn(conversation_id=self.conversation_id, turn_id=f"{self.conversation_id}-t{self.sent}",
                    speaker=self.speaker if mine else "Assistant", role="user" if mine else "assistant",
                    text=text, ts=datetime.now(UTC), user_id=self.user_id)
        self.sent += 1
        return turn


@dataclass
class User:
    """A tenant's user with a few conversations going on at once; new ones start as old ones end."""

    tenant: str
    user_id: str
    live: int
    rng: random.Random
    conversations: list[Conversation] = field(default_factory=list)
    started: int = 0
    told: list[tuple[str, list[str]]] = field(default_factory=list)  # (speaker, lines) of ended conversations

    def __post_init__(self) -> None:
        self.conversations = [self.new_conversation() for _ in range(self.live)]

    def new_conversation(self) -> Conversation:
        """Start the user's next conversation (8 to 40 turns long); now and then a retelling of an earlier one,
        word for word, so that consolidation finds near-duplicates to merge across conversations."""
        conversation_id = f"{self.user_id}-c{self.started}"
        self.started += 1
        if self.told and self.rng.random() < RETELL:
            speaker, lines = self.rng.choice(self.told)
            return Conversation(tenant=self.tenant, user_id=self.user_id, conversation_id=conversation_id,
                                speaker=speaker, length=len(lines), script=lines)
        return Conversation(tenant=self.tenant, user_id=self.user_id, conversation_id=conversation_id,
                            speaker=self.rng.choice(_NAMES), length=self.rng.randint(8, 40))

    def replace(self, conversation: Conversation, forgotten: bool = False) -> None:
        """Swap an ended (or forgotten) conversation for a new one."""
        if conversation.done and not forgotten:
            self.told.append((conversation.speaker, conversation.said))
        self.conversations[self.conversations.index(conversation)] = self.new_conversation()


def population(tenants: list[str], users: int, conversations: int, seed: int) -> list[User]:
    """`users` users per tenant, each with `conversations` conversations going on at once."""
    return [User(tenant=t, user_id=f"u{u}", live=conversations, rng=random.Random(f"{seed}-{t}-{u}"))
            for t in tenants for u in range(users)]
