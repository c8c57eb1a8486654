"""Smoke tests of benchmarks/: slow, and skipped without the bench extra."""
