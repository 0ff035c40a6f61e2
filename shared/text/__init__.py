"""Reading text: which language and script it is in, and what it costs in tokens."""
