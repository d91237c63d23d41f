"""`python -m vramtune`: the same CLI as the `vramtune` command."""

from vramtune.cli.app import run

if __name__ == "__main__":
    run()
