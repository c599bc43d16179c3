"""The `unirag` command (the typer app is in `commands.py`)."""


def main() -> None:
    """Entry point: imported lazily so that `unirag.cli.options`, which evaluation imports, does
    not pull in every command (and evaluation's own) on the way."""
    from unirag.cli.commands import main as run

    run()
