"""The commands of ``payments-async``, a module per family (see ``_COMMANDS`` in
:mod:`payments_async.cli`, which lists them without importing them)."""
