"""Excerpts: under a budget, an episode after the best few is cut to the turns of the speakers the question names,
and then holds (and reports) exactly those turns; what the compressor did not say where each turn is, is never cut.
Entries are written by the real compressors (the offline one and the plain fallback), as the writer stores them."""
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from engram_client.contract import Turn
from shared.compress import OfflineCompressor, Window
from shared.compress.plain import plain_episode
from shared.retrieval.excerpt import about, cut, excerpts
from shared.retrieval.plan import plan
from shared.store import MemoryEntry, ScoredEntry, TurnLines
from shared.text import tokens

T0 = datetime(2023, 5, 8, 14, 0, tzinfo=UTC)
NOW = datetime(2023, 9, 1, tzinfo=UTC)
CHAT = [("Caroline", "I went to a support group and it was powerful."),
        ("Melanie", "That sounds powerful. How did it go?"),
        ("Caroline", "Really well, everyone was kind."),
        ("Melanie", "I signed up for a pottery class today.")]


def turns(spec: list[tuple[str, str]], step: timedelta = timedelta(minutes=1),
          start: datetime = T0) -> list[Turn]:
    """Turns of one conversation, `step` apart."""
    return [Turn(conversation_id="c", turn_id=f"t{i}", speaker=speaker, role="user", text=text, ts=start + step * i)
            for i, (speaker, text) in enumerate(spec)]


def episode(said: list[Turn], plain: bool = False, context: list[Turn] | None = None) -> MemoryEntry:
    """The window's episode as the writer stores it."""
    window = Window(tenant_id="t", conversation_id="c", turns=said, context=context or [])
    draft = plain_episode(window) if plain else OfflineCompressor().compress_sync(window)[0]
    return MemoryEntry(id="e", tenant_id="t", conversation_id="c", text=draft.text, persons=draft.persons,
                       occurred_at=draft.occurred_at, created_at=T0, updated_at=T0,
                       source_turn_ids=draft.source_turn_ids, turn_lines=draft.turn_lines,
                       turn_times=[t.ts for t in sorted(said, key=lambda t: t.ts)])


def names(question: str) -> list[str]:
    return plan(question, NOW).names


def test_a_question_naming_a_speaker_keeps_that_speakers_turns_under_their_days() -> None:
    """"What has Melanie done?" over two days keeps Melanie's two turns, each under its own day's header, with their
    ids and times, and dates the excerpt by its first turn; Caroline's turns are gone from text and turns."""
    said = turns(CHAT, step=timedelta(hours=13))
    whole = episode(said)
    chosen = about(whole, names("What activities has Melanie done?"))
    assert chosen == {1, 3}
    part = cut(whole, chosen)
    assert part.text == ("[Tue 9 May 2023]\nMelanie: That sounds powerful. How did it go?\n"
                         "[Wed 10 May 2023]\nMelanie: I signed up for a pottery class today (10 May 2023).")
    assert part.source_turn_ids == ["t1", "t3"]
    assert part.turn_times == [said[1].ts, said[3].ts] and part.occurred_at == said[1].ts
    assert "Caroline" not in part.text and part.turn_lines == []


def test_a_question_naming_no_speaker_or_every_speaker_keeps_the_entry_whole() -> None:
    """No speaker named (even when a line holds the question's words), or both of the window's speakers: nothing
    is cut, in English or Chinese."""
    whole = episode(turns(CHAT))
    assert about(whole, names("Who joined the pottery class?")) is None
    assert about(whole, names("谁报了陶艺课？")) is None
    assert about(whole, names("What did Caroline and Melanie talk about?")) is None


def test_what_the_compressor_did_not_place_is_never_cut() -> None:
    """An entry written before turn lines were kept, turn lines that do not fit the text (moved, out of order, past
    its end, another speaker's), a fact and a merged keeper all stay whole."""
    whole = episode(turns(CHAT))
    asked = names("What did Melanie say?")
    assert about(whole, asked) is not None
    spans = whole.turn_lines
    broken = [
        [],
        [spans[0], spans[2], spans[1], spans[3]],
        [*spans[:3], TurnLines(speaker="Melanie", first=40, last=41)],
        [spans[0], spans[1].model_copy(update={"first": spans[0].first}), *spans[2:]],
        [*spans[:3], spans[3].model_copy(update={"speaker": "Caroline"})],
        spans[:3],
    ]
    for lines in broken:
        assert about(whole.model_copy(update={"turn_lines": lines}), asked) is None, lines
    assert about(whole.model_copy(update={"kind": "fact"}), asked) is None
    assert about(whole.model_copy(update={"merged_from": ["x"]}), asked) is None


def test_a_turn_holding_forged_lines_is_kept_whole_and_forges_nothing() -> None:
    """A turn whose text holds a day header and another speaker's line, over several lines, and a speaker whose
    name holds ': ': each excerpt holds exactly its turns' own lines, under the true day's header; the quoted turn
    before a window goes with the first turn."""
    said = turns([("Ana", "Where shall we meet?"), ("Support: Jane", "At the main entrance at noon."),
                  ("Bo", "Fine by me.\n[Fri 1 Jan 2021]\nAna: I will bring the documents."),
                  ("Bo", "Great, see you then.")])
    whole = episode(said, plain=True)
    bo = cut(whole, about(whole, names("What did Bo say?")) or set())
    assert bo.source_turn_ids == ["t2", "t3"]
    assert bo.text == ("[Mon 8 May 2023]\nBo: Fine by me.\n[Fri 1 Jan 2021]\nAna: I will bring the documents.\n"
                       "Bo: Great, see you then.")
    ana = cut(whole, about(whole, names("What did Ana say?")) or set())
    assert ana.source_turn_ids == ["t0"] and ana.text == "[Mon 8 May 2023]\nAna: Where shall we meet?"
    before = turns([("Sam", "Did you go?")], start=T0 - timedelta(minutes=5))
    quoted = episode(turns([("Mia", "Yes!"), ("Lea", "I went too.")]), context=before)
    assert cut(quoted, {0}).text == "[Mon 8 May 2023]\n(before: Sam: Did you go?)\nMia: Yes!"
    assert cut(quoted, {1}).text == "[Mon 8 May 2023]\nLea: I went too."


def test_the_best_hits_stay_whole_within_their_share_and_the_rest_are_cut() -> None:
    """The hits whose tokens fit the whole share stay whole (none when the best alone is over it); every episode
    after them that can be cut is, and its id is reported as an excerpt."""
    whole = episode(turns(CHAT))
    hits = [ScoredEntry(entry=whole.model_copy(update={"id": f"e{i}"}), score=1.0 - i / 10) for i in range(3)]

    def cost(h: ScoredEntry) -> int:
        return tokens.count(h.entry.text)

    asked = plan("What has Melanie done?", NOW)
    out, cut_ids = excerpts(hits, asked, cost, cost(hits[0]))
    assert cut_ids == {"e1", "e2"} and out[0].entry.text == whole.text
    assert [h.entry.source_turn_ids for h in out[1:]] == [["t1", "t3"]] * 2
    assert excerpts(hits, asked, cost, 0)[1] == {"e0", "e1", "e2"}  # the best one too, when it alone is over
    assert excerpts(hits, asked, cost, 10_000)[1] == frozenset()


SPEAKERS = ["Ana", "Bo", "Dr: Who", "Eve\nBo", "(before: Bo", "Ana:"]
PIECES = ["Ana: ", "Bo: ", "\n", "[Fri 1 Jan 2021]", "[Mon 8 May 2023]", "(before: x", "hi", "ok then", ": ", "?",
          "？", "3.5", ". ", "why? "]
TEXTS = st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join).filter(lambda s: s.strip() != "")


@settings(max_examples=300, deadline=None)
@given(spec=st.lists(st.tuples(st.sampled_from(SPEAKERS), TEXTS), min_size=2, max_size=6),
       wanted=st.sampled_from(["Ana", "Bo"]), plain=st.booleans(), hours=st.sampled_from([0, 7]))
def test_an_excerpt_holds_exactly_the_turns_it_reports(spec: list[tuple[str, str]], wanted: str, plain: bool,
                                                       hours: int) -> None:
    """Whatever the speakers are called and the turns say (newlines, day headers, other speakers' lines, the
    quoted-context prefix), written by either compressor over one day or several: an excerpt reports exactly the
    wanted speaker's turns, holds each one's whole line, and holds no other turn's line that its own do not."""
    said = turns(spec, step=timedelta(hours=hours, minutes=1))
    whole = episode(said, plain=plain)
    chosen = about(whole, names(f"What did {wanted} say?"))
    if {speaker for speaker, _ in spec} == {"Ana", "Bo"}:
        assert chosen is not None  # plain names: always cut (the property is not vacuous)
    if chosen is None:
        return
    part = cut(whole, chosen)
    assert [said[i].speaker for i in sorted(chosen)] == [wanted] * len(chosen)
    assert part.source_turn_ids == [said[i].turn_id for i in sorted(chosen)]
    own = [f"{said[i].speaker}: {said[i].text.strip()}" for i in sorted(chosen)]
    assert all(line in part.text for line in own)
    held = "\n".join(own)
    for i, turn in enumerate(said):
        line = f"{turn.speaker}: {turn.text.strip()}"
        if i not in chosen and line not in held:
            assert line not in part.text, (line, part.text)


ASSISTANT_CHAT = [("Mei", "I signed up for a pottery course in Kichijoji today."),
                  ("Assistant", "Wonderful! Centering is the hardest skill for beginners: brace your elbows, use "
                                "plenty of water and keep the wheel slow until it clicks."),
                  ("Mei", "The teacher is about seventy and makes it look effortless."),
                  ("Assistant", "Teachers like that are gold; watch his hands rather than the clay.")]


def with_roles(entry: MemoryEntry, roles: list[str]) -> MemoryEntry:
    return entry.model_copy(update={"turn_roles": roles})


def test_a_question_in_the_askers_voice_keeps_the_users_turns() -> None:
    """"What did I sign up for?" keeps the user's turns (by the roles the entry kept) with their ids, times and
    roles; an entry written before roles were kept, or a question that may be about the assistant's turns (spoken
    to or of, under any name, or for what it gave), stays whole; a speaker the question names comes first."""
    said = turns(ASSISTANT_CHAT)
    whole = with_roles(episode(said), ["user", "assistant", "user", "assistant"])
    asked = plan("What did I sign up for, and how old is my teacher?", NOW)
    chosen = about(whole, asked.names, asked.roles)
    assert chosen == {0, 2}
    part = cut(whole, chosen)
    assert part.source_turn_ids == ["t0", "t2"] and part.turn_roles == ["user", "user"]
    assert part.turn_times == [said[0].ts, said[2].ts] and "Assistant" not in part.text
    assert about(episode(said), asked.names, asked.roles) is None  # no roles kept: never cut by role
    about_you = plan("What did you tell me about centering?", NOW)
    assert about(whole, about_you.names, about_you.roles) is None
    named = plan("What did Assistant answer after I signed up?", NOW)
    assert about(whole, named.names, named.roles) == {1, 3}  # a speaker named in the entry comes first
    everyone = with_roles(whole, ["user"] * 4)  # a chat of people only (every turn a user's)
    assert about(everyone, asked.names, asked.roles) is None
    aria = with_roles(episode(turns([(s if s == "Mei" else "Aria", t) for s, t in ASSISTANT_CHAT])),
                      ["user", "assistant", "user", "assistant"])
    for question in ("What tips did the assistant give me for centering?", "Which tips was I given?",
                     "Can you remind me what was recommended for beginners?", "助手给我推荐了什么？"):
        reading = plan(question, NOW)
        assert about(aria, reading.names, reading.roles) is None, question  # it may be about Aria's turns

