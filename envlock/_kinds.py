"""The names of the file kinds envlock reads (:data:`envlock.formats.KINDS`), importable without
the readers: command-line help (``verify --lock``) is built from them at start-up."""

from __future__ import annotations

__all__ = ["KINDS", "LOCK_KINDS"]

#: every kind :func:`envlock.formats.read` recognises, in the words reports use.
KINDS = ("manifest", "environment.yml", "conda-explicit", "conda-export", "requirements",
         "conda-lock", "pixi.lock", "pylock", "uv.lock", "poetry.lock", "pdm.lock", "Pipfile.lock",
         "Pipfile")

#: the lockfile kinds (installable, complete listings).
LOCK_KINDS = ("conda-lock", "pixi.lock", "pylock", "uv.lock", "poetry.lock", "pdm.lock",
              "Pipfile.lock", "conda-explicit")
