"""LoCoMo's evidence quirks are repaired and the metric counts what the README defines."""
from shared.evaluation.locomo import normalise_evidence, parse_session_time, score


def test_evidence_quirks_are_repaired() -> None:
    """LoCoMo evidence written with semicolons, spaces, parentheses, stray colons or leading zeros is normalised to
    plain D<session>:<turn> ids, and junk is dropped."""
    assert normalise_evidence(["D8:6; D9:17"]) == {"D8:6", "D9:17"}
    assert normalise_evidence(["D:11:26"]) == {"D11:26"}
    assert normalise_evidence(["D30:05"]) == {"D30:5"}
    assert normalise_evidence(["(D1:3)", "D2:4 D2:5"]) == {"D1:3", "D2:4", "D2:5"}
    assert normalise_evidence(["nonsense", ""]) == set()


def test_all_any_and_fraction() -> None:
    """The score says whether all and whether any evidence turns were retrieved, and what fraction of them was."""
    evidence = frozenset({"D1:1", "D2:2"})
    assert score(evidence, [["D1:1", "D1:2"], ["D2:2"]]) == (True, True, 1.0)
    assert score(evidence, [["D1:1"]]) == (False, True, 0.5)
    assert score(evidence, []) == (False, False, 0.0)


def test_session_times_parse_to_aware_datetimes() -> None:
    """LoCoMo's session time strings parse to timezone-aware datetimes with the right date, hour and minute."""
    when = parse_session_time("1:56 pm on 8 May, 2023")
    assert (when.year, when.month, when.day, when.hour, when.minute) == (2023, 5, 8, 13, 56)
    assert when.tzinfo is not None
