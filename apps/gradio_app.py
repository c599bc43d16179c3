"""The Gradio chat app as a script: `python apps/gradio_app.py [OPTIONS]` equals `unirag app [OPTIONS]`.

The app itself is `unirag.app` (installed with the package); this file only re-exports it and
runs it when executed, so it works from any checkout where unirag is installed.
"""

from __future__ import annotations

import sys

from unirag.app import *  # noqa: F401,F403  (the app's public names, for code that imported them from here)
from unirag.app import app_command, build_app, launch  # noqa: F401


def main() -> None:
    """Run `unirag app` with this script's arguments (same options, same one-line errors)."""
    from unirag.cli.commands import main as unirag_main

    sys.argv = ["unirag", "app", *sys.argv[1:]]
    unirag_main()


if __name__ == "__main__":
    main()
