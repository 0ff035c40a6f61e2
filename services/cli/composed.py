"""The whole `engram` command, composed of its modules (services/cli/__init__.py starts a service without it)."""
import typer

from services.cli import certs, commands, console_command, demo, docs, evaluate, mcp_command, serve, tenants, transfer

app = typer.Typer(help="engram: conversational memory over NATS and Qdrant.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
for command in (serve.up, serve.ingestor, serve.retriever, serve.consolidator, commands.ingest, commands.recall,
                commands.entries, commands.forget, commands.consolidate, commands.rebuild, commands.contract,
                demo.demo, mcp_command.mcp, certs.certs):
    app.command()(command)
app.command("export")(transfer.export)
app.command("import")(transfer.import_file)
app.command("console")(console_command.console_command)
app.add_typer(evaluate.app, name="eval")
app.add_typer(docs.app, name="docs")
app.add_typer(tenants.app, name="tenants")
