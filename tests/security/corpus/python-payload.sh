#!/bin/sh
# A crafted interpreter: what a manifest's [python] base-prefix (or [target] python) may name.
# Run, it leaves a trace and pretends to be the recorded Python.
touch "@MARK@"
echo "@VERSION@"
