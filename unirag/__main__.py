"""`python -m unirag ...`: the same as the `unirag` command."""

from .cli import main

if __name__ == "__main__":
    main()
