"""payments-async."""
