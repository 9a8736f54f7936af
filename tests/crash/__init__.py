"""Crash and power-loss tests of a partition log, with the tools they share.

* :mod:`crash.faults` — fault injection: cut, flip, zero-fill or garble files past the last flush, break
  or delete index files, crash the swap / split / delete protocols after any number of file operations.
* :mod:`crash.verify` — a full check of a (closed) partition directory against Kafka's invariants.
* :mod:`crash.writer` — the writer process the SIGKILL tests kill (a fork server, so a kill round costs
  a ``fork`` instead of a Python start-up).
"""
