"""Security settings: one NATS identity, files that exist, and secrets that no repr, log or option name shows."""
import ssl
from pathlib import Path

import pytest
from faststream.nats import security as fs
from pydantic import SecretStr, ValidationError

from shared.errors import ConfigError
from shared.messaging.security import broker_options, nats_security, qdrant_options
from shared.settings import Settings


@pytest.mark.parametrize(("fields", "needle"), [
    ({"nats_user": "engram", "nats_password": SecretStr("p"), "nats_token": SecretStr("t")},
     "ENGRAM_NATS_USER and ENGRAM_NATS_TOKEN are all set"),
    ({"nats_user": "engram"}, "ENGRAM_NATS_USER and ENGRAM_NATS_PASSWORD go together"),
    ({"nats_tls_cert_file": Path("cert.pem")}, "ENGRAM_NATS_TLS_CERT_FILE and ENGRAM_NATS_TLS_KEY_FILE"),
    ({"nats_inbox_prefix": "_INBOX.>"}, "nats_inbox_prefix"),
])
def test_inconsistent_security_settings_say_what_to_fix(fields: dict[str, object], needle: str) -> None:
    """Conflicting NATS credentials, a user without a password, a TLS cert without its key, or a wildcard inbox prefix
    are refused with a message naming what to fix."""
    with pytest.raises(ValidationError, match=needle):
        Settings(**fields)  # type: ignore[arg-type]


def test_secrets_never_show_in_a_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    """Passwords and API keys never appear in the settings' repr, str or JSON dump or in the security object's repr, yet
    reach the NATS and Qdrant client options."""
    monkeypatch.setenv("ENGRAM_NATS_USER", "engram")
    monkeypatch.setenv("ENGRAM_NATS_PASSWORD", "hunter2-hunter2")
    monkeypatch.setenv("ENGRAM_QDRANT_API_KEY", "qdrant-key-123")
    settings = Settings()
    security = nats_security(settings)
    for text in (repr(settings), str(settings), repr(security), settings.model_dump_json()):
        assert "hunter2-hunter2" not in text and "qdrant-key-123" not in text
    assert security.identity == "user:engram"
    assert security.client_options()["password"] == "hunter2-hunter2"
    assert qdrant_options(settings) == {"api_key": "qdrant-key-123"}


def test_each_identity_reaches_both_kinds_of_connection(tmp_path: Path) -> None:
    """User and password, token, nkey seed and no identity each give the right nats-py options and FastStream security
    object, with the inbox prefix in both."""
    seed = tmp_path / "user.nk"
    seed.write_text("SUAGMJH5XLGZKQQWAWKRZJIGMOU4HPFUYLXJMXOO5NLFEO2OOQJ5LPRDPM\n")
    cases = [
        (Settings(nats_user="engram", nats_password=SecretStr("p")), {"user": "engram", "password": "p"},
         fs.NatsUserPassword),
        (Settings(nats_token=SecretStr("t")), {"token": "t"}, fs.NatsToken),
        (Settings(nats_nkey_seed_file=seed), {"nkeys_seed": str(seed)}, fs.NatsNKey),
        (Settings(nats_inbox_prefix="_INBOX_acme"), {}, fs.NatsSecurity),
    ]
    for settings, expected, kind in cases:
        security = nats_security(settings)
        options = security.client_options()
        assert {k: options[k] for k in expected} == expected
        assert options["inbox_prefix"] == settings.nats_inbox_prefix
        broker = broker_options(security)
        assert type(broker["security"]) is kind and broker["inbox_prefix"] == settings.nats_inbox_prefix


def test_tls_files_must_exist_and_give_a_context(tmp_path: Path) -> None:
    """A missing NATS creds file or Qdrant CA file is refused naming it, and an existing CA bundle gives both clients an
    SSL context (skipped without a CA bundle)."""
    with pytest.raises(ConfigError, match="ENGRAM_NATS_CREDS_FILE"):
        nats_security(Settings(nats_creds_file=tmp_path / "missing.creds"))
    with pytest.raises(ConfigError, match="the Qdrant CA file"):
        qdrant_options(Settings(qdrant_tls_ca_file=tmp_path / "missing.pem"))
    ca = Path(ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")
    if not ca.is_file():
        pytest.skip("this machine has no CA bundle to load")
    assert isinstance(qdrant_options(Settings(qdrant_tls_ca_file=ca))["verify"], ssl.SSLContext)
    assert isinstance(nats_security(Settings(nats_tls_ca_file=ca)).client_options()["tls"], ssl.SSLContext)
