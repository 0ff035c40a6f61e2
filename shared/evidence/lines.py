"""What a window says itself: its lines as said, without their speakers, its date header and its context line."""
from shared.text import patterns

_SPEAKER = patterns.compile(r"^[^:\n]{1,64}:\s*+", patterns.MULTILINE)
_HEADER = patterns.compile(r"^\[[^\]\n]*\]$|^\(before: [^\n]*\)$", patterns.MULTILINE)


def utterances(text: str) -> list[str]:
    """The lines of a window as said, without their speakers, its date header and its context line."""
    body = _HEADER.sub("", text)
    return [line.strip() for line in _SPEAKER.sub("", body).splitlines() if line.strip()]
