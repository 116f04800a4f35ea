"""Probes: functions that observe one area of a target environment and return a frozen record.

Each probe takes its world as parameters (``root``, ``env``, the target's ``prefix`` and
``sys.path``, a ``runner``), reads files and runs external commands only through
:func:`envlock._run.run`, and records failures as data (``status``/``error``) instead of
raising.
"""
