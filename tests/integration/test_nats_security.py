"""engram connects to a NATS server that demands a token, or TLS with a private CA, and never shows the secret.

A real nats-server (from the wheel) with a config of its own; certificates made by `openssl` for the test.
"""
import logging
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from engram_client import connection
from engram_client.errors import Unavailable
from services.stack import running
from shared.messaging import nats_server
from shared.messaging.security import nats_security
from shared.settings import Settings
from tests.support.ids import unique
from tests.support.polling import eventually

TOKEN = "s3cret-token-" + "x" * 12


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a server certificate for 127.0.0.1 it signed."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificates for the TLS test")
    folder = tmp_path_factory.mktemp("tls")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=engram-test-ca",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=folder)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
             "-out", "server.csr", cwd=folder)
    (folder / "ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "1", "-extfile", "ext", "-out", "server.pem", cwd=folder)
    return folder


def _server(folder: Path, config: str) -> nats_server.EmbeddedNats:
    path = folder / "nats.conf"
    path.write_text(config)
    return nats_server.start(folder / "store", config=path)


@pytest.fixture
def token_server(tmp_path: Path) -> Iterator[nats_server.EmbeddedNats]:
    server = _server(tmp_path, f'authorization {{ token: "{TOKEN}" }}\n')
    yield server
    server.stop()


async def test_the_stack_serves_with_a_token_and_never_shows_it(token_server: nats_server.EmbeddedNats,
                                                                tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """With a NATS token the stack becomes healthy and answers a client that reads ENGRAM_NATS_TOKEN, and the token
    never appears in reprs, metrics or logs."""
    caplog.set_level(logging.DEBUG)
    settings = Settings(data_dir=tmp_path / "data", http_port=0, nats_token=SecretStr(TOKEN))
    assert TOKEN not in repr(settings) and TOKEN not in repr(nats_security(settings))
    async with running(settings, nats_url=token_server.url) as state:
        assert await state.health.problem() is None
        async with httpx.AsyncClient() as http:
            exposition = (await http.get(f"http://127.0.0.1:{state.http_port}/metrics")).text
        assert "engram_turns_total" in exposition and TOKEN not in exposition
        tenant = unique("tok")
        from services.cli.base import connect_client  # the CLI's client reads ENGRAM_NATS_TOKEN
        with pytest.MonkeyPatch.context() as env:
            env.setenv("ENGRAM_NATS_TOKEN", TOKEN)
            client = await connect_client(token_server.url, tenant, settings.subject_prefix)
        async with client:
            reply = await client.recall("anything")
            assert reply.error is None
    assert TOKEN not in caplog.text


async def test_a_wrong_token_is_refused_clearly(token_server: nats_server.EmbeddedNats) -> None:
    """Connecting with the wrong token fails as Unavailable saying it cannot connect to NATS."""
    with pytest.raises(Unavailable, match="cannot connect to NATS"):
        await connection.connect(token_server.url, "intruder", first_connect_timeout_s=2,
                                 security=nats_security(Settings(nats_token=SecretStr("wrong"))))


async def test_the_stack_serves_over_tls_trusting_a_private_ca(certificates: Path, tmp_path: Path) -> None:
    """A TLS server signed by a private CA is refused without that CA and served, healthy, once
    ENGRAM_NATS_TLS_CA_FILE names it."""
    server = _server(tmp_path, f'tls {{\n  cert_file: "{certificates / "server.pem"}"\n'
                               f'  key_file: "{certificates / "server.key"}"\n}}\n')
    try:
        url = server.url.replace("nats://", "tls://")
        with pytest.raises(Unavailable):  # the system's CAs do not know this server
            await connection.connect(url, "untrusting", first_connect_timeout_s=2)
        settings = Settings(data_dir=tmp_path / "data", http_port=0, nats_tls_ca_file=certificates / "ca.pem")
        async with running(settings, nats_url=url) as state:
            assert await eventually(state.health.problem, lambda problem: problem is None) is None
            nc = await connection.connect(url, "trusting", security=nats_security(settings))
            try:
                assert nc.is_connected and nc.connected_url is not None
            finally:
                await connection.close(nc)
    finally:
        server.stop()


async def test_tls_before_any_nats_byte_with_a_handshake_first_server(certificates: Path, tmp_path: Path) -> None:
    """A server that starts TLS before its INFO: no plaintext byte, so a man in the middle cannot strip TLS."""
    server = _server(tmp_path, f'tls {{\n  cert_file: "{certificates / "server.pem"}"\n'
                               f'  key_file: "{certificates / "server.key"}"\n  handshake_first: true\n}}\n')
    try:
        url = server.url.replace("nats://", "tls://")
        settings = Settings(data_dir=tmp_path / "data", http_port=0, nats_tls_ca_file=certificates / "ca.pem")
        with pytest.raises(Unavailable):  # the client waits for a plaintext INFO that never comes
            await connection.connect(url, "late", first_connect_timeout_s=3, security=nats_security(settings))
        first = settings.model_copy(update={"nats_tls_handshake_first": True})
        async with running(first, nats_url=url) as state:
            assert await eventually(state.health.problem, lambda problem: problem is None) is None
    finally:
        server.stop()
