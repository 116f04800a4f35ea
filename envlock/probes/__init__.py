"""Probes: plain functions that read one area of an environment and return a frozen record.

Each probe takes its world as parameters (directories, an environment mapping, a command
runner), never prints and never raises for a problem of the observed environment: it records
``status``/``error`` instead.
"""
