"""A verbose assistant does not hide the user's words from the dense search: an assistant chat whose replies run to
thousands of characters, stored by the writer, is found by the meaning of a user's turn that comes after a long
reply (the dense model reads every turn's beginning, shared/embedding/passage.py)."""
from datetime import UTC, datetime

from engram_client.contract import Turn
from shared.ingest import windows
from shared.ingest.writer import memorize
from shared.store import Scope, Vectors
from tests.support.ids import unique
from tests.support.plain import Memory
from tests.support.turns import conversation

START = datetime(2024, 2, 1, 9, 0, tzinfo=UTC)
# What each window's second user turn says (after a 3,000-character reply): only the dense search can match a
# paraphrase of it.
LATER = ["we finally adopted a beagle puppy from the shelter", "my sister is getting married in Lisbon in June",
         "I started learning the cello on Tuesday evenings", "our kitchen was flooded by a burst pipe last night",
         "I got promoted to head of the data team", "my grandmother turned ninety and we had a big party"]
REPLY = ("Here is a thorough plan for your week, covering sleep, meals, a budget spreadsheet, the errands you listed, "
         "how to batch emails, and a reminder to stretch between meetings. ") * 18


async def test_a_users_turn_after_a_long_reply_is_found_by_meaning(memory: Memory) -> None:
    """Six windows (user, 3,000-character reply, user, reply): asked in other words about what each second user
    turn says, the dense search alone ranks its window among the first three every time, and first for most (read
    from the text's first 2,048 characters, the windows were indistinguishable: one of them came first for every
    question)."""
    tenant = unique("t")
    said: list[Turn] = []
    for i, later in enumerate(LATER):
        lines = [("Mia", f"Can you plan my week {i}? Lots of errands."), ("Assistant", REPLY),
                 ("Mia", f"Thanks! Other news: {later}."), ("Assistant", REPLY)]
        said += [t.model_copy(update={"role": "assistant" if t.speaker == "Assistant" else "user"})
                 for t in conversation(lines, conversation_id=f"c{i}", start=START.replace(day=1 + i))]
    for i in range(len(LATER)):
        await memorize(memory.writer, windows.split(tenant, [t for t in said if t.conversation_id == f"c{i}"], 4))
    questions = ["What dog did Mia get?", "Where is the wedding of Mia's sister?", "Which instrument is Mia studying?",
                 "What water damage did Mia's home have?", "What new role did Mia get at work?",
                 "How old did Mia's grandma turn?"]
    dense = await memory.writer.embedder.queries(questions)
    ranked = []
    for question, vector in zip(questions, dense, strict=True):
        vectors = Vectors(dense=vector, sparse=memory.retrieval.sparse.query(question))
        hits = await memory.store.search(Scope(tenant_id=tenant), vectors, using="dense", limit=3)
        ranked.append([h.entry.conversation_id for h in hits])
    assert all(f"c{i}" in top for i, top in enumerate(ranked)), ranked
    assert sum(top[0] == f"c{i}" for i, top in enumerate(ranked)) >= len(questions) - 2, ranked
