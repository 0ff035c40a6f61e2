"""An engram CLI process started ahead of need: it imports the CLI, then waits until it is told to run.

Most of an engram process's start is the CLI's imports (about 4 s of CPU on 2 cores, more under load), which say
nothing about recovery. A test that SIGKILLs engram and starts it again makes the next process while the current one
runs, so the imports overlap the work, and the restart itself is the real one: the same `main()` of
`python -m services.cli` with the same arguments and environment, reading its settings only once told to run. A
spare whose test is gone (its stdin closed) exits without running.
"""
import contextlib
import subprocess
import sys
from pathlib import Path

# `python -m services.cli <args>`, once "go" arrives on stdin.
WAIT_THEN_RUN = """
import sys
from services.cli import SERVICES, main
if sys.argv[1:2] and sys.argv[1] in SERVICES:
    import services.cli.serve  # what main() then runs, imported ahead
else:
    import services.cli.composed
if sys.stdin.readline() != "go\\n":
    sys.exit(0)
main()
"""


class Spare:
    """One waiting `engram <args>` process, its output appended to `log`."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        with log.open("ab") as out:
            self.process = subprocess.Popen([sys.executable, "-c", WAIT_THEN_RUN, *args], env=env,
                                            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)

    def run(self) -> subprocess.Popen[bytes]:
        """Let it run; the process (one that already died says why in the log, and its exit code shows it)."""
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # it exited already: the caller sees it in poll()
            self.process.stdin.write(b"go\n")
            self.process.stdin.close()
        return self.process

    def discard(self) -> None:
        """End it unused (it never ran: nothing to stop cleanly)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if self.process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
