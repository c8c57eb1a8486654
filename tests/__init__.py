"""The test suite: unit, integration, reliability and benchmark smoke tests."""
