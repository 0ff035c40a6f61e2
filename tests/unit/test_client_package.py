"""The light client stays light: engram_client imports only itself, the standard library, nats-py and pydantic (and
OpenTelemetry's API lazily, an optional extra), and the server depends on exactly the client version beside it."""
import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
ALLOWED = {"engram_client", "nats", "pydantic"}
OPTIONAL = {"opentelemetry": "tracing.py"}  # imported inside a function of that module only, when installed


def test_the_client_imports_nothing_of_the_server() -> None:
    """No module of engram_client imports anything but the stdlib, nats-py, pydantic and itself at import time;
    OpenTelemetry only inside a function of tracing.py (the `otel` extra), never at a module's top level."""
    imported: dict[str, set[str]] = {}
    for path in (CLIENT / "engram_client").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        lazy = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for n in ast.walk(f)}
        for node in ast.walk(tree):
            if id(node) in lazy and path.name in OPTIONAL.values():
                continue
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                imported.setdefault(name.split(".")[0], set()).add(path.name)
    foreign = {m: files for m, files in imported.items() if m not in ALLOWED and m not in sys.stdlib_module_names}
    assert not foreign, f"engram_client imports {foreign}; it may use only {sorted(ALLOWED)} and the stdlib"


def test_the_client_depends_on_nats_and_pydantic_only_and_the_server_on_this_client() -> None:
    """The client's required dependencies are nats-py and pydantic, OpenTelemetry's API an optional extra; the
    server pins the client beside it, with that extra."""
    client = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    server = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert client["name"] == "engram-client"
    assert sorted(d.split(">")[0].split("=")[0] for d in client["dependencies"]) == ["nats-py", "pydantic"]
    assert [d.split(">")[0] for d in client["optional-dependencies"]["otel"]] == ["opentelemetry-api"]
    assert f"engram-client[otel]=={client['version']}" in server["dependencies"]
    assert server["name"] != "engram" and "Private :: Do Not Upload" in server["classifiers"]
