"""Which process holds a lease, named so that another engram process on the same host can tell when it is gone.

A holder that crashes stops renewing, and its lease expires after the TTL (lease.py): meanwhile every forget and
consolidation of its tenants waits, up to the TTL, and a forget asked for then is refused `unavailable`. A process on
the same host, though, can see at once that the holder is gone. A lease names its holder's process by the kernel's
boot id, its PID namespace, its process id and the time it started. The holder is gone when the process is on this
boot and in this PID namespace, and no process has its id, or the one that has it started at another time (the id was
reused), or it is dead and not yet reaped (a zombie). A supervisor restarting a crashed engram on the same host is the
usual case: the new process takes the lease over at once.

A holder on another host, in another PID namespace (another container) or that names no process (a lease written
by an engram from before this) is waited out, as before. Nothing is read but this host's /proc; where it cannot be
read (not Linux), no process is named and every lease is waited out.
"""
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

PROC = Path("/proc")
_GONE_STATES = {"Z", "X"}  # a zombie (dead, not yet reaped) or dead


class Process(BaseModel):
    """A process: the kernel's boot id, its PID namespace, its id and when it started (clock ticks after boot)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    boot: str
    namespace: str
    pid: int
    started: int

    @classmethod
    def this(cls) -> "Process | None":
        """This process, or None where /proc does not say."""
        return cls.of(os.getpid())

    @classmethod
    def of(cls, pid: int) -> "Process | None":
        """The process with this id in this PID namespace, or None where /proc does not say (or it has none)."""
        stat = _stat(pid)
        try:
            boot = (PROC / "sys/kernel/random/boot_id").read_text().strip()
            namespace = os.readlink(PROC / "self/ns/pid")
        except OSError:
            return None
        return cls(boot=boot, namespace=namespace, pid=pid, started=stat[1]) if stat else None

    def sees_gone(self, other: "Process") -> bool:
        """Whether `other`, as this process sees it, is surely gone: on this boot and in this PID namespace, and no live
        process has its id and start (this one has its own)."""
        if (other.boot, other.namespace) != (self.boot, self.namespace):
            return False
        stat = _stat(other.pid)
        return stat is None or stat[0] in _GONE_STATES or stat[1] != other.started


def _stat(pid: int) -> tuple[str, int] | None:
    """The state and start time of the process with this id, or None when there is none (or /proc does not say)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": the name may hold spaces and brackets; the fields after its last bracket are
    # the state (field 3) on to the start time (field 22).
    fields = text[text.rfind(")") + 2:].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None
