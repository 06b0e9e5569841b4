"""The `vsr` command line (and the `build-dataset` console script).

Each command (group) lives in its own module of this package; this file only wires them
together and turns every failure into one line on stderr and a non-zero exit (set VSR_DEBUG=1
for the traceback), worded by ``vsr_cli.errors``.

Help is click's plain layout (``rich_markup_mode=None``): Rich's boxed tables cut long option
names at 80 columns and label flags ``<bool>``, and not importing Rich keeps `--help` fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn

import typer

from vsr_cli import audit_export as cli_audit
from vsr_cli import build as cli_build
from vsr_cli import data as cli_data
from vsr_cli import db as cli_db
from vsr_cli import import_release as cli_import
from vsr_cli import invite as cli_invite
from vsr_cli import label_models as cli_label_models
from vsr_cli import match as cli_match
from vsr_cli import platform as cli_platform
from vsr_cli import revalidate as cli_revalidate
from vsr_cli import sample as cli_sample
from vsr_cli import serve as cli_serve
from vsr_cli import study as cli_study
from vsr_cli.errors import error_message, is_help_request, is_usage_error, usage_message
from vsr_cli.failure import CliError
from vsr_cli.help import plain_metavars

app = typer.Typer(
    name="vsr",
    help="Build VSR-style visual spatial reasoning datasets by crowdsourcing.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"vsr {version('vsr-pipeline')}")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Build VSR-style visual spatial reasoning datasets by crowdsourcing."""


app.add_typer(cli_db.app, name="db")
app.add_typer(cli_serve.admin_app, name="admin")
cli_serve.admin_app.command("audit-export")(cli_audit.audit_export)
app.add_typer(cli_invite.invite_app, name="invite")
app.add_typer(cli_study.study_app, name="study")
app.add_typer(cli_data.data_app, name="data")
app.add_typer(cli_platform.platform_app, name="platform")
app.add_typer(cli_label_models.label_models_app, name="label-models")
app.command("sample")(cli_sample.sample)
app.command("import-vsr")(cli_import.import_vsr)
app.command("serve")(cli_serve.serve)
app.command("match")(cli_match.match)
app.command("build")(cli_build.build)
app.command("revalidate")(cli_revalidate.revalidate)

build_app = typer.Typer(
    name="build-dataset",
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
build_app.command()(cli_build.build)


def _run(entry: Callable[..., object], args: list[str] | None = None) -> None:
    args = sys.argv[1:] if args is None else args
    try:
        entry(args, standalone_mode=False)
    except CliError as exc:
        _fail(str(exc), code=exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        _close_bars()
        typer.echo("aborted", err=True)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # the last line of defence: never a traceback for users
        if os.environ.get("VSR_DEBUG"):
            raise
        if is_help_request(exc):
            exc.show()  # type: ignore[attr-defined]
            sys.exit(2)
        if is_usage_error(exc):
            _fail(usage_message(exc, args), code=2)
        _fail(error_message(exc))


def _fail(message: str, code: int = 1) -> NoReturn:
    _close_bars()
    typer.secho(f"error: {message}", err=True, fg="red")
    sys.exit(code)


def _close_bars() -> None:
    """Close any progress bar still open (it clears its line), so the error that follows
    starts a line of its own."""
    tqdm_mod = sys.modules.get("tqdm")
    if tqdm_mod is None:
        return
    for bar in list(getattr(tqdm_mod.tqdm, "_instances", ())):
        bar.close()


def _command(typer_app: typer.Typer | None = None) -> Callable[..., object]:
    command: Callable[..., object] = plain_metavars(typer.main.get_command(typer_app or app))
    return command


def main() -> None:
    _run(_command())


def build_dataset_main() -> None:
    _run(_command(build_app))


if __name__ == "__main__":
    main()
