"""Entry point: registers the commands and turns user errors into one line and exit 2."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import typer

from vramtune import __version__
from vramtune.cli import (
    bench_cmd,
    check_cmd,
    doctor_cmd,
    emit_cmd,
    explain_cmd,
    profiles_cmd,
    report_cmd,
    sweep_cmd,
    trial_cmd,
    verify_cmd,
)
from vramtune.cli.common import Terminated
from vramtune.compat import require_trainable_stack
from vramtune.errors import UserError, quoted
from vramtune.schema import printable

app = typer.Typer(
    name="vramtune", no_args_is_help=True, pretty_exceptions_enable=False,
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


def trains(command: Callable[..., Any]) -> Callable[..., Any]:
    """A command that runs PPO trials: refuse, in one line, a jax/brax pair that cannot
    train, after its options parsed (so --help still works) and before anything runs."""
    @functools.wraps(command)  # typer reads the options through __wrapped__
    def checked(*args: Any, **kwargs: Any) -> Any:
        require_trainable_stack()
        return command(*args, **kwargs)
    return checked


app.command("trial")(trains(trial_cmd.trial))
app.command("check")(check_cmd.check)
app.command("emit-config")(emit_cmd.emit_config)
app.command("profiles")(profiles_cmd.profiles)
app.command("init-profile")(profiles_cmd.init_profile)
app.command("sweep")(trains(sweep_cmd.sweep))
app.command("bench")(trains(bench_cmd.bench_command))
app.command("report")(report_cmd.report)
app.command("compare")(report_cmd.compare)
app.command("explain")(explain_cmd.explain)
app.command("verify")(trains(verify_cmd.verify))
app.command("doctor")(doctor_cmd.doctor)


def usage_line(exc: Exception) -> str:
    """A bad flag, value or command in one line ('' when there is nothing to say), like every
    other refusal: click's own block (usage, a hint, a blank line, then the error) is four,
    and pydantic's "Value error, " prefix on an enum value is its wording, not ours."""
    format_message = getattr(exc, "format_message", None)
    message = format_message() if callable(format_message) else str(exc)
    message = " ".join(message.replace("Value error, ", "").split())
    if not message:  # a bare `vramtune`: click has printed the help, and raises with no message
        return ""
    ctx = getattr(exc, "ctx", None)
    command = getattr(ctx, "command_path", None) or "vramtune"
    return f"vramtune: error: {printable(message.rstrip('.'))}; see '{command} --help'"


_COMPLETION_FLAGS = ("--install-completion", "--show-completion")


def check_completion_args(argv: Sequence[str]) -> None:
    """typer's completion flags take no shell name: they detect the shell they run in, and a
    word after them was ignored (``--install-completion zsh`` wrote bash's completion into
    ~/.bashrc). Refused, before anything is written, with the way that works."""
    for i, arg in enumerate(argv[:-1]):
        if arg in _COMPLETION_FLAGS and not argv[i + 1].startswith("-"):
            raise UserError(f"{arg} takes no shell name ({quoted(argv[i + 1])}): it works for "
                            f"the shell it runs in; run `vramtune {arg}` from that shell")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; UserError anywhere below becomes 'vramtune: error: ...' and exit 2."""
    try:
        check_completion_args(sys.argv[1:] if argv is None else argv)
        # click returns a command's typer.Exit code instead of raising it here.
        code = app(args=argv, standalone_mode=False, prog_name="vramtune")
    except UserError as exc:
        print(f"vramtune: error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except typer.TyperException as exc:  # typer >= 0.29 vendors click: usage errors land here
        line = usage_line(exc)
        if line:
            print(line, file=sys.stderr)
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
