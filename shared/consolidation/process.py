"""Which process holds a lease, named so that another engram process on the same host can tell when it is gone.

A holder that crashes stops renewing, and its lease expires after the TTL (lease.py): meanwhile every forget and
consolidation of its tenants waits, up to the TTL, and a forget asked for then is refused `unavailable`. A process on
the same host, though, can see at once that the holder is gone. A lease names its holder's process by its host's
name and the kernel's boot id, its PID namespace (and time namespace), its user, its process id and the time it started.
The holder is gone when it was of this host, boot, namespaces and user, and no process has its id, or the one that
has it started at another time (the id was reused), or it is dead and not yet reaped (a zombie). A supervisor that
restarts a crashed engram as a process of the same host and namespace (systemd, supervisord, a shell, `make run`)
is the case this serves: the new process takes the lease over at once. A container started again gets a new PID
namespace, so there the lease is waited out, as before.

So is a holder of another host, namespace or user, one that names no process (a lease written by an engram from
before this), and any holder /proc does not answer for plainly (denied, unreadable): a live holder is not taken for
a gone one on a guess. Nothing is read but this host's /proc; where it does not describe this process (not Linux, a
/proc of another PID namespace) or may hide live processes (mounted with hidepid), no process is named and every
lease is waited out. Two hosts of one name and one boot id (a VM cloned while running) would look alike.
"""
import os
import socket
from pathlib import Path

from pydantic import BaseModel, ConfigDict

PROC = Path("/proc")
_GONE_STATES = {b"Z", b"X"}  # a zombie (dead, not yet reaped) or dead


class Process(BaseModel):
    """A process: its host's name and boot id, its PID (and time) namespace, its user, its id and when it started
    (clock ticks after boot)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    host: str
    boot: str
    namespace: str
    uid: int
    pid: int
    started: int

    @classmethod
    def this(cls) -> "Process | None":
        """This process, or None where /proc does not say (not Linux, or a /proc of another PID namespace)."""
        pid = os.getpid()
        try:
            if os.readlink(PROC / "self") != str(pid) or _hides_processes():
                return None
            boot = (PROC / "sys/kernel/random/boot_id").read_text().strip()
            spaces = [os.readlink(PROC / "self/ns/pid")]
            if (PROC / "self/ns/time").exists():  # a start time reads differently across time namespaces
                spaces.append(os.readlink(PROC / "self/ns/time"))
            stat = _stat(pid)
        except (OSError, ValueError):
            return None
        if stat is None:
            return None
        return cls(host=socket.gethostname(), boot=boot, namespace=" ".join(spaces), uid=os.getuid(), pid=pid,
                   started=stat[1])

    @classmethod
    def named(cls, value: object) -> "Process | None":
        """The process a lease names, or None when it names none in this form (an engram from before)."""
        try:
            return cls.model_validate(value)
        except ValueError:
            return None

    def sees_gone(self, other: "Process") -> bool:
        """Whether `other`, as this process sees it, is surely gone: of this host, boot, namespaces and user, and no
        live process has its id and start (this one has its own). Whatever /proc does not answer plainly (denied,
        busy, unreadable) is not gone; where /proc may hide processes (hidepid), this process names none
        (`this`), so it never judges."""
        if (other.host, other.boot, other.namespace, other.uid) != (self.host, self.boot, self.namespace, self.uid):
            return False
        try:
            stat = _stat(other.pid)
        except (OSError, ValueError):
            return False
        return stat is None or stat[0] in _GONE_STATES or stat[1] != other.started


def _hides_processes() -> bool:
    """Whether /proc may hide a live process even of this user: a proc mount on /proc with hidepid, or showing only
    process entries (subset=pid), among every one there (a /proc mounted again covers the first); or none found."""
    found = False
    for line in (PROC / "self/mountinfo").read_text(errors="replace").splitlines():
        mount, _, after = line.partition(" - ")  # optional fields come before the separator
        fields, options = mount.split(), after.split()
        if len(fields) > 4 and fields[4] == "/proc" and options[:1] == ["proc"]:
            found = True
            supers = dict(o.partition("=")[::2] for o in (options[2] if len(options) > 2 else "").split(","))
            if supers.get("hidepid", "0") not in ("0", "off") or "subset" in supers:
                return True
    return not found


def _stat(pid: int) -> tuple[bytes, int] | None:
    """The state and start time of the process with this id, or None when there is none; raises OSError or
    ValueError when /proc does not say."""
    if pid <= 0:
        raise ValueError(f"no process has id {pid}")
    try:
        text = (PROC / str(pid) / "stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # "pid (comm) state ppid ...": the name may hold spaces, brackets and any bytes; the fields after its last
    # bracket are the state (field 3) on to the start time (field 22).
    fields = text[text.rfind(b")") + 2:].split()
    if len(fields) < 20:
        raise ValueError(f"/proc/{pid}/stat has {len(fields)} fields after the name")
    return fields[0], int(fields[19])
