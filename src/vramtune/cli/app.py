"""Entry point: registers the commands and turns user errors into one line and exit 2."""

from __future__ import annotations

import sys

import typer

from vramtune import __version__
from vramtune.cli import (
    bench_cmd,
    check_cmd,
    doctor_cmd,
    emit_cmd,
    profiles_cmd,
    report_cmd,
    sweep_cmd,
    trial_cmd,
    verify_cmd,
)
from vramtune.cli.common import Terminated
from vramtune.errors import UserError

app = typer.Typer(
    name="vramtune", no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
    help="Measure how many parallel envs (and which batch settings) make Brax/MJX/Playground "
         "PPO fastest on this GPU without running out of memory.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"vramtune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """vramtune."""


app.command("trial")(trial_cmd.trial)
app.command("check")(check_cmd.check)
app.command("emit-config")(emit_cmd.emit_config)
app.command("profiles")(profiles_cmd.profiles)
app.command("init-profile")(profiles_cmd.init_profile)
app.command("sweep")(sweep_cmd.sweep)
app.command("bench")(bench_cmd.bench_command)
app.command("report")(report_cmd.report)
app.command("compare")(report_cmd.compare)
app.command("verify")(verify_cmd.verify)
app.command("doctor")(doctor_cmd.doctor)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; UserError anywhere below becomes 'vramtune: error: ...' and exit 2."""
    try:
        # click returns a command's typer.Exit code instead of raising it here.
        code = app(args=argv, standalone_mode=False, prog_name="vramtune")
    except UserError as exc:
        print(f"vramtune: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.TyperException as exc:  # typer >= 0.29 vendors click: usage errors land here
        show = getattr(exc, "show", None)
        if show:
            show()
        else:
            print(f"vramtune: error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", 2))
    except typer.Abort:
        print("vramtune: aborted", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("vramtune: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("vramtune: terminated", file=sys.stderr)
        return 143
    return code if isinstance(code, int) else 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
