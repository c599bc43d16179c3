"""`python -m unirag ...`: the same as the `unirag` command."""

from unirag.cli.commands import main

if __name__ == "__main__":
    main()
