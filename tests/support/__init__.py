"""Shared helpers of the tests, imported as ``tests.support.<module>``."""
