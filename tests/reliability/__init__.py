"""Fault, attack and soak tests of the library as a whole."""
