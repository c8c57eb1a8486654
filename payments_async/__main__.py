"""``python -m payments_async``: the command line (same as ``payments-async``)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from typing import Final

CLI_EXTRA_HINT: Final = "pip install 'payments-async[cli]'"
_CLI_MODULES: Final = ("click", "rich")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line; without the ``cli`` extra, say what to install (exit 2).

    Args:
        argv: the arguments without the program name; ``sys.argv[1:]`` if None.
    """
    missing = [name for name in _CLI_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        sys.stderr.write(
            f"error: the command line needs the 'cli' extra ({', '.join(missing)} not "
            f"installed): {CLI_EXTRA_HINT}\n"
        )
        sys.exit(2)
    from .cli import main as cli_main

    cli_main(argv)


if __name__ == "__main__":
    main()
