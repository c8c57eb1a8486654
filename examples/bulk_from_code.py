"""Cancel every payment listed in a CSV or JSONL file from your own code, resumably.

Against the sandbox (start it first with ``payments-async sandbox``)::

    python examples/bulk_from_code.py examples/bulk-cancel.csv

The results go to ``bulk-cancel.results.csv`` in the working directory, the journal beside
them; run the same command again after a crash and it resumes without sending twice.
With the ``PAYMENTS_*`` credentials set, pass the service's address as a second argument.
"""

from __future__ import annotations

import asyncio
import os
import sys

from payments_async import Credentials, Limits, PaymentsClient
from payments_async.bulk import BulkInputError, bulk_cancel, connection_limit_for

SANDBOX_URL = "http://127.0.0.1:8765"  # where `payments-async sandbox` listens
CONCURRENCY = 16


async def main(input_path: str, base_url: str) -> int:
    if os.environ.get("PAYMENTS_CLIENT_ID"):
        credentials = Credentials.from_env()
    else:
        credentials = Credentials.sandbox()
    limit = connection_limit_for(CONCURRENCY)
    limits = Limits(connections=limit)
    async with PaymentsClient(credentials, base_url=base_url, limits=limits) as client:
        try:
            report = await bulk_cancel(client, input_path, concurrency=CONCURRENCY)
        except BulkInputError as exc:
            for problem in exc.row_errors:  # every bad row, with its line; nothing was sent
                print(f"{input_path}: {problem}", file=sys.stderr)
            return 2
    for outcome, rows in sorted(report.totals.as_dict().items()):
        print(f"{outcome:>16}  {rows}")
    print(f"results: {report.results_path}")
    return 0 if report.complete else 3


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    url = sys.argv[2] if len(sys.argv) > 2 else SANDBOX_URL
    sys.exit(asyncio.run(main(sys.argv[1], url)))
