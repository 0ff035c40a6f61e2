"""The npm packages the contract and TypeScript-client tests run (the AsyncAPI parser, the type generator, tsc and
the client's NATS packages), installed from the committed package-lock.json when node_modules is missing or stale."""
import fcntl
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TS_CLIENT = ROOT / "clients" / "typescript"
CONTRACT = ROOT / "contract"


def node_tools() -> tuple[str, str]:
    """Paths of `node` and `npm`; the test fails (never skips) when either is missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.fail("node and npm are needed (Node 20 or newer): apt-get install nodejs npm, or see nodejs.org")
    return node, npm


def installed(folder: Path = TS_CLIENT) -> Path:
    """`folder`'s node_modules, after `npm ci` if it is missing or older than package-lock.json.

    npm writes node_modules/.package-lock.json at the end of an install, so a half-done install counts as missing.
    A file lock keeps two test processes from installing at once.
    """
    _, npm = node_tools()
    marker = folder / "node_modules" / ".package-lock.json"
    with (folder / "package-lock.json").open("rb") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            if not marker.exists() or marker.stat().st_mtime < (folder / "package-lock.json").stat().st_mtime:
                started = time.perf_counter()
                done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder,
                                      capture_output=True, text=True, timeout=600, check=False)
                assert done.returncode == 0, f"npm ci in {folder} failed:\n{done.stdout}\n{done.stderr}"
                print(f"\nnpm ci in {folder.name}: {time.perf_counter() - started:.1f}s")
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
    return folder / "node_modules"


def run_node(*args: str, cwd: Path = TS_CLIENT, timeout_s: float = 120.0,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `node args...` in `cwd` (after installing the packages) and return what it did."""
    node, _ = node_tools()
    installed(cwd)
    return subprocess.run([node, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False,
                          env=env)
