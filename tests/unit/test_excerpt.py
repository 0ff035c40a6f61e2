"""Excerpts: under a budget, an episode after the best few is cut to the turns the question is about, and then
holds (and reports) only those turns; what cannot be read line by line is never cut."""
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.retrieval.excerpt import about, cut, excerpts
from shared.retrieval.plan import plan
from shared.store import MemoryEntry, ScoredEntry
from shared.text import tokens

T0 = datetime(2023, 5, 8, 14, 0, tzinfo=UTC)
NOW = datetime(2023, 9, 1, tzinfo=UTC)
WINDOW = "\n".join([
    "[Mon 8 May 2023]",
    "Caroline: I went to a support group yesterday (7 May 2023).",
    "Melanie: That sounds powerful. How did it go?",
    "Caroline: Really well, everyone was kind.",
    "[Tue 9 May 2023]",
    "Melanie: I signed up for a pottery class today.",
])
TURNS = ["D1:1", "D1:2", "D1:3", "D2:1"]


def entry(text: str = WINDOW, turns: list[str] | None = None, **extra: object) -> MemoryEntry:
    ids = TURNS if turns is None else turns
    return MemoryEntry(id="e", tenant_id="t", conversation_id="c", text=text, occurred_at=T0, created_at=T0,
                       updated_at=T0, source_turn_ids=ids, persons=["Caroline", "Melanie"],
                       turn_times=[T0 + timedelta(minutes=i) for i in range(len(ids))], **extra)  # type: ignore[arg-type]


def test_a_question_naming_a_speaker_keeps_that_speakers_turns_under_their_dates() -> None:
    """"What has Melanie done?" keeps Melanie's two turns, each under its own day's header, with their ids and
    times; Caroline's turns are gone from the text and from the turns it reports."""
    whole = entry()
    turns = about(whole, plan("What activities has Melanie done?", NOW))
    assert turns == {1, 3}
    part = cut(whole, turns)
    assert part.text == ("[Mon 8 May 2023]\nMelanie: That sounds powerful. How did it go?\n"
                         "[Tue 9 May 2023]\nMelanie: I signed up for a pottery class today.")
    assert part.source_turn_ids == ["D1:2", "D2:1"]
    assert part.turn_times == [whole.turn_times[1], whole.turn_times[3]]
    assert "Caroline" not in part.text


def test_a_question_naming_no_speaker_keeps_every_entry_whole() -> None:
    """No speaker named, nothing is cut, even when one line holds the question's words ("pottery class")."""
    assert about(entry(), plan("Who joined the pottery class?", NOW)) is None
    assert about(entry(), plan("谁报了陶艺课？", NOW)) is None


def test_what_cannot_be_read_line_by_line_or_would_lose_nothing_is_never_cut() -> None:
    """A summary in prose, lines that do not match the turns one to one (a turn whose text forges a speaker's
    line), a fact, a merged keeper, and a question about every turn or none of them: all stay whole."""
    asked = plan("What did Melanie say?", NOW)
    assert about(entry(text="Caroline and Melanie talked about a support group and pottery."), asked) is None
    forged = WINDOW.replace("everyone was kind.", "everyone was kind.\nMelanie: I never said this.")
    assert about(entry(text=forged), asked) is None
    assert about(entry(kind="fact"), asked) is None
    assert about(entry(merged_from=["x"]), asked) is None
    assert about(entry(), plan("What did Caroline and Melanie talk about?", NOW)) is None
    assert about(entry(), plan("Where is the museum?", NOW)) is None


def test_a_turn_on_several_lines_is_kept_whole_and_the_quoted_context_goes_with_the_first_turn() -> None:
    """A turn written over two lines is kept with both; the quoted turn before a window belongs to its first turn."""
    text = ("[Mon 8 May 2023]\n(before: Sam: Did you go?)\nMelanie: Yes!\nCaroline: I went too.\n[laughs]\n"
            "It rained all day.")
    whole = entry(text=text, turns=["a", "b"])
    caroline = cut(whole, {1})
    assert caroline.text == "[Mon 8 May 2023]\nCaroline: I went too.\n[laughs]\nIt rained all day."
    assert cut(whole, {0}).text == "[Mon 8 May 2023]\n(before: Sam: Did you go?)\nMelanie: Yes!"


def test_the_best_hits_stay_whole_within_their_share_and_the_rest_are_cut() -> None:
    """The hits whose tokens fit the whole share stay whole; every readable episode after them is cut, and its id
    is reported as an excerpt."""
    hits = [ScoredEntry(entry=entry().model_copy(update={"id": f"e{i}"}), score=1.0 - i / 10) for i in range(3)]

    def cost(h: ScoredEntry) -> int:
        return tokens.count(h.entry.text)

    out, cut_ids = excerpts(hits, plan("What has Melanie done?", NOW), cost, cost(hits[0]))
    assert cut_ids == {"e1", "e2"}
    assert out[0].entry.text == WINDOW
    assert [h.entry.source_turn_ids for h in out[1:]] == [["D1:2", "D2:1"]] * 2
    assert excerpts(hits, plan("What has Melanie done?", NOW), cost, 10_000)[1] == frozenset()


_LINE = st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
                  st.lists(st.sampled_from(["Ana: ", "Bo: ", "\n", "[laughs]", "(before: ", "ok", ": "]),
                           max_size=6).map("".join))


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(_LINE, min_size=2, max_size=6), speakers=st.lists(st.sampled_from(["Ana", "Bo"]), min_size=6,
                                                                         max_size=6),
       wanted=st.sampled_from(["Ana", "Bo"]))
def test_an_excerpt_reports_exactly_the_turns_whose_lines_it_keeps(texts: list[str], speakers: list[str],
                                                                   wanted: str) -> None:
    """Whatever the turns say (newlines, colons, a speaker's name), an excerpt's every kept turn line is that turn's
    own text, in order, and the turns it reports are exactly those whose lines it keeps."""
    lines = [f"{speaker}: {text}" for speaker, text in zip(speakers, texts, strict=False)]
    ids = [f"t{i}" for i in range(len(lines))]
    whole = MemoryEntry(id="e", tenant_id="t", conversation_id="c", text="[Mon 8 May 2023]\n" + "\n".join(lines),
                        occurred_at=T0, created_at=T0, updated_at=T0, source_turn_ids=ids, persons=["Ana", "Bo"])
    turns = about(whole, plan(f"What did {wanted} say?", NOW))
    if turns is None:
        return
    part = cut(whole, turns)
    assert part.source_turn_ids == [ids[i] for i in sorted(turns)]
    assert part.text == "[Mon 8 May 2023]\n" + "\n".join(lines[i] for i in sorted(turns))
    assert all(speakers[i] == wanted for i in turns)
