"""The label values metrics.initialise_series creates at start-up: complete, and the same as the code's own."""
from typing import get_args

from engram_client.errors import ErrorCode
from shared.llm.schemas import PURPOSES
from shared.runtime import metrics


def test_the_known_error_codes_and_llm_purposes_are_the_codes_own() -> None:
    """The literal copies in metrics.py follow the error codes and LLM purposes they stand for."""
    assert get_args(ErrorCode) == metrics.ERROR_CODES
    assert metrics.LLM_PURPOSES == PURPOSES


def test_every_labelled_metric_has_known_label_values() -> None:
    """A new labelled metric must say its label values, so it too has series from start-up (build_info excepted:
    its one series is set when the HTTP endpoint starts)."""
    listed = {id(metric) for metric, _ in metrics.KNOWN_LABELS}
    labelled = [value for value in vars(metrics).values()
                if hasattr(value, "_labelnames") and value._labelnames and value is not metrics.build_info]
    assert labelled
    missing = [metric._name for metric in labelled if id(metric) not in listed]
    assert missing == []
    for metric, values in metrics.KNOWN_LABELS:
        assert values and all(len(v) == len(metric._labelnames) for v in values), metric._name
