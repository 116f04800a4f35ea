"""envlock's version (one place; the build backend reads it from here)."""

__version__ = "0.1.0"
