"""`python -m unirag ...`: the same as the `unirag` command."""

from unirag.cli.main import main

if __name__ == "__main__":
    main()
