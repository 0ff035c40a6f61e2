"""OpenTelemetry traces of turns and recalls: spans (spans.py), the turns' contexts a window links to (marks.py),
and the OTLP export (export.py)."""
