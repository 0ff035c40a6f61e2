"""The `engram` command: run the services, ingest files, recall, inspect entries, a demo and the evaluation."""
import os

import typer

from services.cli import commands, demo, evaluate, serve

app = typer.Typer(help="engram: conversational memory over NATS and Qdrant.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
for command in (serve.up, serve.ingestor, serve.retriever, serve.consolidator, commands.ingest, commands.recall,
                commands.entries, commands.forget, commands.consolidate, commands.rebuild, commands.contract,
                demo.demo):
    app.command()(command)
app.add_typer(evaluate.app, name="eval")


def main() -> None:
    """Entry point of the `engram` console script."""
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()
