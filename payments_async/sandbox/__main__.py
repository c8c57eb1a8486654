"""``python -m payments_async.sandbox``: run the sandbox as a process."""

import sys

from ._main import main

if __name__ == "__main__":
    sys.exit(main())
