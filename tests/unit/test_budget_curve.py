"""Recall against tokens (issue 37, item 6): the --budgets list, the curve's figures and table, the SVG chart, and the
BM25 windowed baseline the curve compares with."""
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
import typer

from engram_client.contract import Turn
from services.cli.evaluate import parse_budgets as cli_budgets
from shared.evaluation import baselines, curve, locomo

SVG = "{http://www.w3.org/2000/svg}"


def test_budgets_parse_to_ascending_distinct_token_counts() -> None:
    """A comma list, spaces allowed, comes back ascending with each budget once; one budget alone is a list too."""
    assert curve.parse_budgets("4000, 500,1000,2000,500") == [500, 1000, 2000, 4000]
    assert curve.parse_budgets("32000") == [32000]


@pytest.mark.parametrize(("text", "says"), [
    ("", "empty item"), ("500,,1000", "empty item"), ("500,abc", "'abc' is not a whole number"),
    ("1.5", "'1.5' is not a whole number"), ("-500", "'-500' is not a whole number"),
    ("0", "between 1 and 32000"), ("500,32001", "not 32001"),
])
def test_bad_budgets_are_refused_with_what_is_wrong(text: str, says: str) -> None:
    """Anything but positive whole numbers up to a recall's limit (32,000 tokens) is refused, naming the bad item."""
    with pytest.raises(ValueError, match=says):
        curve.parse_budgets(text)


def test_the_cli_turns_a_bad_budget_list_into_a_usage_error() -> None:
    """`--budgets` absent leaves the command as it was; a bad list, or -k beside it, is a usage error on --budgets."""
    assert cli_budgets(None) is None and cli_budgets(None, k=[5]) is None
    assert cli_budgets("1000,500") == [500, 1000]
    with pytest.raises(typer.BadParameter, match="between 1 and 32000"):
        cli_budgets("500,40000")
    with pytest.raises(typer.BadParameter, match=r"leave out -k$"):
        cli_budgets("500", k=[5])
    with pytest.raises(typer.BadParameter, match=r"leave out --budget$"):
        cli_budgets("500", budget=1000)


def _curve() -> curve.Curve:
    """A hand-made curve: engram and one baseline at two budgets, LoCoMo-like types (one type never asked)."""
    a = [curve.Answer("multi-hop", False, 480), curve.Answer("multi-hop", True, 500),
         curve.Answer("temporal", True, 460)]
    b = [curve.Answer("multi-hop", True, 900), curve.Answer("multi-hop", True, 1000),
         curve.Answer("temporal", True, 950)]
    base = [curve.Answer("multi-hop", False, 500), curve.Answer("multi-hop", False, 490),
            curve.Answer("temporal", False, 400)]
    return curve.Curve(dataset="hand-made", budgets=[500, 1000],
                       systems={"engram": "engram (fast)", "bm25-windows6": "(f) BM25 windows"},
                       types=["multi-hop", "temporal", "open-domain"],
                       points=[curve.point("engram", 500, a), curve.point("engram", 1000, b),
                               curve.point("bm25-windows6", 500, base), curve.point("bm25-windows6", 1000, base)])


def test_a_point_pools_its_questions_overall_and_by_type() -> None:
    """All-evidence recall is the share of questions with every evidence turn found, overall and per type, with the
    mean context tokens; ordering questions' in-order share only when some were asked."""
    p = _curve().at("engram", 500)
    assert p is not None and p.questions == 3 and p.all_evidence == pytest.approx(2 / 3)
    assert p.by_type == {"multi-hop": 0.5, "temporal": 1.0} and p.questions_by_type == {"multi-hop": 2, "temporal": 1}
    assert p.mean_context_tokens == pytest.approx(480) and p.in_order is None
    ordered = curve.point("engram", 500, [curve.Answer("ordering", True, 10, in_order=True),
                                          curve.Answer("ordering", True, 10, in_order=False),
                                          curve.Answer("single_hop", True, 10)])
    assert ordered.in_order == 0.5


def test_the_table_has_a_row_per_system_and_budget() -> None:
    """Rows go system by system, budgets ascending: label, budget, overall, each type (a dash for a type never
    asked) and tokens; an in-order column follows ordering only when the data has ordering questions."""
    c = _curve()
    assert curve.columns(c) == ["system", "budget", "all evidence", "multi-hop", "temporal", "open-domain", "tokens"]
    assert curve.table_rows(c) == [
        ["engram (fast)", "500", "0.667", "0.500", "1.000", "—", "480"],
        ["engram (fast)", "1000", "1.000", "1.000", "1.000", "—", "950"],
        ["(f) BM25 windows", "500", "0.000", "0.000", "0.000", "—", "463"],
        ["(f) BM25 windows", "1000", "0.000", "0.000", "0.000", "—", "463"],
    ]
    hops = curve.Curve(dataset="stories", budgets=[500], systems={"engram": "engram"},
                       types=["multi_hop", "ordering", "single_hop"],
                       points=[curve.point("engram", 500, [curve.Answer("ordering", True, 9, in_order=False)])])
    assert curve.columns(hops) == ["system", "budget", "all evidence", "multi-hop", "ordering", curve.IN_ORDER,
                                   "single-hop", "tokens"]
    assert curve.table_rows(hops) == [["engram", "500", "1.000", "—", "1.000", "0.000", "—", "9"]]
    assert "| engram (fast) | 500 | 0.667 |" in curve.markdown(c)


def test_the_chart_is_valid_svg_with_a_line_per_system_placed_along_the_budgets() -> None:
    """The SVG parses as XML, has one polyline per system (named in the legend), both axis labels and every budget
    as a tick label, and each line's points move right as the budget grows and up as recall grows."""
    c = _curve()
    root = ET.fromstring(curve.svg(c))
    assert root.tag == f"{SVG}svg"
    lines = root.findall(f"{SVG}polyline")
    assert [line.get("data-series") for line in lines] == ["engram (fast)", "(f) BM25 windows"]
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "token budget of each recall (log scale)" in labels and "all-evidence recall" in labels
    assert {"500", "1000", "engram (fast)", "(f) BM25 windows"} <= set(labels)
    engram = [tuple(map(float, xy.split(","))) for xy in (lines[0].get("points") or "").split()]
    assert len(engram) == 2 and engram[0][0] < engram[1][0]
    assert engram[0][1] > engram[1][1]  # SVG's y grows downward: higher recall is higher up


def test_the_chart_places_x_on_a_log_scale_and_y_within_zero_to_one() -> None:
    """Doubling budgets are evenly spaced (log axis), every x inside the plot; recall 0 and 1 land on the axis's
    bottom and top."""
    chart = curve.line_chart("t", {"s": [(500, 0.0), (1000, 0.5), (2000, 1.0), (4000, 1.0)]}, [500, 1000, 2000, 4000],
                             "x", "y")
    root = ET.fromstring(chart)
    [line] = root.findall(f"{SVG}polyline")
    xs, ys = zip(*(tuple(map(float, xy.split(","))) for xy in (line.get("points") or "").split()), strict=True)
    assert xs == tuple(sorted(xs)) and xs[1] - xs[0] == pytest.approx(xs[3] - xs[2], abs=0.2)
    assert ys[0] > ys[1] > ys[2] == ys[3]


def _conversation() -> locomo.Conversation:
    """Two sessions of 8 and 3 turns."""
    t0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    sessions = [[Turn(conversation_id=f"c-s{s}", turn_id=f"D{s}:{i}", speaker="Ann", role="user", text=f"turn {i}",
                      ts=t0 + timedelta(days=7 * s, seconds=30 * i)) for i in range(1, n + 1)]
                for s, n in ((1, 8), (2, 3))]
    return locomo.Conversation(sample_id="c", speakers=("Ann", "Bob"), sessions=sessions)


def test_the_bm25_windows_baseline_searches_six_turn_dated_windows_by_bm25_alone() -> None:
    """bm25-windows6 cuts each session into non-overlapping six-turn windows prefixed with the session date, as the
    hybrid windowed baseline does, and searches the sparse vector only; the curve compares exactly these two."""
    bm25, hybrid = baselines.CURVE_BASELINES
    assert (bm25.name, bm25.search, hybrid.name, hybrid.search) == ("bm25-windows6", "sparse", "hybrid-windows6",
                                                                    "hybrid")
    assert bm25.units is hybrid.units is baselines.session_windows
    assert bm25 not in baselines.BASELINES  # the k tables without --budgets stay as they were
    units = bm25.units(_conversation())
    assert [u.sources for u in units] == [[f"D1:{i}" for i in range(1, 7)], ["D1:7", "D1:8"],
                                          ["D2:1", "D2:2", "D2:3"]]
    assert units[0].text.startswith("[15 May 2023] Ann: turn 1\n") and units[2].text.startswith("[22 May 2023]")
    assert [u.conversation_id for u in units] == ["c-s1", "c-s1", "c-s2"]
