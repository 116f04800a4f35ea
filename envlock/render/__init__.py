"""Renderers: turn models into text.  Only this package and the CLI print; rich is imported
inside the functions that use it."""
