"""`python -m services.cli`: the same as the `engram` command."""
from services.cli import main

main()
