"""The `vsr` command line (and the `build-dataset` console script).

Each command group lives in its own ``cli_*`` module; this file only wires them together and
turns every failure into one line on stderr and a non-zero exit (set VSR_DEBUG=1 for the
traceback).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import typer

from dataset import cli_build, cli_db, cli_import, cli_invite, cli_match, cli_sample, cli_serve
from dataset.errors import CliError

app = typer.Typer(
    name="vsr",
    help="Build VSR-style visual spatial reasoning datasets by crowdsourcing.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(cli_db.app, name="db")
app.add_typer(cli_serve.admin_app, name="admin")
app.add_typer(cli_invite.invite_app, name="invite")
app.command("sample")(cli_sample.sample)
app.command("import-vsr")(cli_import.import_vsr)
app.command("serve")(cli_serve.serve)
app.command("match")(cli_match.match)
app.command("build")(cli_build.build)
app.command("revalidate")(__import__("dataset.cli_revalidate").cli_revalidate.revalidate)

build_app = typer.Typer(
    name="build-dataset",
    add_completion=False,
    pretty_exceptions_enable=False,
)
build_app.command()(cli_build.build)


def _run(entry: Callable[..., object]) -> None:
    try:
        entry(standalone_mode=False)
    except CliError as exc:
        typer.secho(f"error: {exc}", err=True, fg="red")
        sys.exit(1)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # the last line of defence: never a traceback for users
        if os.environ.get("VSR_DEBUG"):
            raise
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        msg = " ".join(str(exc).split()) or type(exc).__name__
        typer.secho(f"error: {type(exc).__name__}: {msg[:500]}", err=True, fg="red")
        sys.exit(1)


def main() -> None:
    _run(typer.main.get_command(app))


def build_dataset_main() -> None:
    _run(typer.main.get_command(build_app))


if __name__ == "__main__":
    main()
