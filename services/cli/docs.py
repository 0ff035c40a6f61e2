"""`engram docs config`: the configuration reference page, generated from the settings (the one source)."""
from pathlib import Path
from typing import Annotated

import typer

from services.cli.base import console

app = typer.Typer(help="Documentation generated from code.", no_args_is_help=True)


@app.command()
def config(page: Annotated[Path, typer.Option("--page", help="the configuration page")] = Path("docs/configuration.md"),
           check: bool = typer.Option(False, "--check", help="write nothing; fail if the page is stale")) -> None:
    """Write the settings table of the configuration page from `Settings` (variable, type, default, description)."""
    from services.docs import configuration

    if not page.is_file():
        console.print(f"[red]{page} does not exist[/red]; run this from the repository's root or pass --page")
        raise typer.Exit(1)
    if check:
        if configuration.is_stale(page):
            console.print(f"[red]{page} differs from the settings[/red]; run `engram docs config`")
            raise typer.Exit(1)
        console.print(f"{page} matches the settings")
        return
    changed = configuration.write(page)
    console.print(f"{'wrote' if changed else 'unchanged:'} {page}")
