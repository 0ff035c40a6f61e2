"""Processes a test started, found from /proc (the ones a crashed or killed parent left behind included)."""
from pathlib import Path


def nats_servers_under(folder: Path) -> list[int]:
    """The pids of nats-server processes storing under `folder`."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone meanwhile
            continue
        running = state != "Z" and cmdline[0].endswith(b"nats-server")
        if running and str(folder).encode() in b" ".join(cmdline):
            pids.append(int(proc.name))
    return pids
