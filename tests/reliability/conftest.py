"""Reliability suite. Its figures (tests/support/reliability.py) are printed at the end of
the run by tests/conftest.py, which also collects them from pytest-xdist's workers."""
