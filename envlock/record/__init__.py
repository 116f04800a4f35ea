"""Record the *run*, not only the environment.

* ``envlock run -- CMD`` (:mod:`envlock.record.supervise`, :mod:`envlock.record.job`): the
  command as a supervised child; resources used against what the scheduler granted
  (:mod:`envlock.record.granted`), signals, leftover processes (:mod:`envlock.record.proctree`)
  and findings in plain words (:mod:`envlock.record.findings`), written to ``run.toml``;
* :func:`envlock.record` inside the program (:mod:`envlock.record.process`): the snapshot plus
  a ``[process]`` table of what only the live process knows.

Layer: above the probes (it takes snapshots), beside verify; nothing here imports a framework.
"""

from __future__ import annotations

__all__: list[str] = []
