"""Fast tests of one module or function each, with no real server (make unit)."""
