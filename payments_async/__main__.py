"""``python -m payments_async``: the command line (same as ``payments-async``)."""

from .cli import main

if __name__ == "__main__":
    main()
