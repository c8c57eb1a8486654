"""Submit a credit transfer (pacs.008) and wait until its status is final (pacs.002).

Against the sandbox (start it first with ``payments-async sandbox``)::

    python examples/submit_and_wait.py

Against a real service, with the ``PAYMENTS_*`` credentials in the environment::

    python examples/submit_and_wait.py https://payments.example.com

Exit status: 0 accepted, 1 rejected (or a code that cannot be classified).
"""

from __future__ import annotations

import asyncio
import os
import sys

from payments_async import Address, Credentials, Outcome, PaymentsClient, build_credit_transfer

SANDBOX_URL = "http://127.0.0.1:8765"  # where `payments-async sandbox` listens


async def main(base_url: str) -> int:
    # The environment's credentials when they are set; else the sandbox's predefined client.
    if os.environ.get("PAYMENTS_CLIENT_ID"):
        credentials = Credentials.from_env()
    else:
        credentials = Credentials.sandbox()
    payment = build_credit_transfer(
        debtor_name="Alice Martin",
        debtor_iban="FR14 2004 1010 0505 0001 3M02 606",
        debtor_agent_id="20041",
        # SEPA refuses unstructured addresses since 15 November 2026: town and country in
        # their own fields (structured, or hybrid with at most two lines)
        debtor_address=Address(
            street="Rue des Lilas", building="12", post_code="75011", town="Paris", country="FR"
        ),
        creditor_name="Example Shop GmbH",
        creditor_iban="DE89 3704 0044 0532 0130 00",
        creditor_agent_id="37040044",
        creditor_address=Address(town="Berlin", country="DE", lines=("Hauptstrasse 1",)),
        amount="250.00",
        remittance="Order 2024-0815",
    )
    async with PaymentsClient(credentials, base_url=base_url) as client:
        # Retries resend these exact bytes under the same msgId: never a second payment.
        submission = await client.submit_credit_transfer(payment)
        print(f"submitted {payment.message_id}: paymentsServiceId {submission.payments_service_id}")
        status = await client.wait_for_payment_status(submission.payments_service_id, timeout=60)
    print(f"final status {status.status} ({status.outcome.value})")
    if status.outcome is not Outcome.ACCEPTED:
        print(f"reason: {' '.join(status.reason_codes)} {'; '.join(status.reason_texts)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else SANDBOX_URL)))
