"""The light client stays light: engram_client imports only itself, the standard library, nats-py and pydantic, and
the server depends on exactly the client version beside it."""
import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
ALLOWED = {"engram_client", "nats", "pydantic"}


def test_the_client_imports_nothing_of_the_server() -> None:
    imported: dict[str, set[str]] = {}
    for path in (CLIENT / "engram_client").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                imported.setdefault(name.split(".")[0], set()).add(path.name)
    foreign = {m: files for m, files in imported.items() if m not in ALLOWED and m not in sys.stdlib_module_names}
    assert not foreign, f"engram_client imports {foreign}; it may use only {sorted(ALLOWED)} and the stdlib"


def test_the_client_depends_on_nats_and_pydantic_only_and_the_server_on_this_client() -> None:
    client = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    server = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert client["name"] == "engram-client"
    assert sorted(d.split(">")[0].split("=")[0] for d in client["dependencies"]) == ["nats-py", "pydantic"]
    assert f"engram-client=={client['version']}" in server["dependencies"]
    assert server["name"] != "engram" and "Private :: Do Not Upload" in server["classifiers"]
