"""Tests against real servers: the sandbox, PostgreSQL, proxies, subprocesses."""
