"""Probes: plain functions that read one area of an environment and return a frozen record.

Each probe is a plain function of one frozen :class:`envlock.probes.world.World` (root,
environment, target, ``PATH``, command runner, per-command timeout) plus its own options; it
never prints and never raises for a problem of the observed environment: it records
``status``/``error`` instead.
"""
