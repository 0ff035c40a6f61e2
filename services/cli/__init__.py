"""The `engram` command: run the services, ingest files, recall, inspect entries, export and import memory, a demo,
the evaluation and the MCP server (composed in composed.py).

Starting a service (`engram up`, `ingestor`, `retriever`, `consolidator`) loads only what running it needs: not the
evaluation, the MCP server or the certificate tools, which took a second of every start (restarts after a crash
included) to import.
"""
import os
import sys
from typing import Any

SERVICES = ("up", "ingestor", "retriever", "consolidator")


def main() -> None:
    """Entry point of the `engram` console script."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    if len(sys.argv) > 1 and sys.argv[1] in SERVICES:
        import typer

        from services.cli import serve

        services = typer.Typer(help="engram: conversational memory over NATS and Qdrant.", no_args_is_help=True,
                               pretty_exceptions_enable=False)
        for command in (serve.up, serve.ingestor, serve.retriever, serve.consolidator):
            services.command()(command)
        services()
        return
    from services.cli.composed import app

    app()


def __getattr__(name: str) -> Any:
    """`app`, the whole command, loaded when asked for."""
    if name == "app":
        from services.cli.composed import app

        return app
    raise AttributeError(name)
