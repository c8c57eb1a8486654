"""The commands of ``payments-async``, a module per family (see ``_COMMANDS`` in
`payments_async.cli`, which lists them without importing them)."""
