"""kafkalog's benchmarks: ``python -m bench [--quick]`` (``make bench`` / ``make bench-quick``).

Every figure is a median of several runs and is reported as a ratio against a baseline measured in the same
run (raw ``os.write``, raw read + CRC, kafka-python, Kafka's Java code, SQLite, LMDB ...), never as a timed
unit test. Results go to ``docs/benchmarks.md``, ``docs/benchmarks.json`` and ``docs/benchmarks/*.png``.

Modules:

* :mod:`bench.harness` - timing helpers, :class:`~bench.harness.Row`, targets, the registry;
* :mod:`bench.report` - the report model, ``--merge``, Markdown and JSON; :mod:`bench.charts` - the PNG charts;
* :mod:`bench.bench_records` - the record layer (batch validation, decode, encode) against kafka-python;
* :mod:`bench.bench_baselines` - raw file I/O, fsync, SQLite, LMDB and persist-queue figures that later
  benchmarks (log append/read) compare against;
* ``bench.bench_columnar`` (when present) - columnar decode;
* :mod:`bench.bench_objstore` - the Spark source over Kafka tiered-storage archives in a real S3 server
  (:mod:`bench.seaweed` starts SeaweedFS on loopback; the tests' ``s3_server`` fixture uses the same helper);
* :mod:`bench.bench_tiering` - tiered storage of kafkalog's own logs (issue #25) against the same server: copy
  passes vs obstore's parallel put, appends with a copy in flight vs off and vs obstore's own upload of the
  same files (the floor), fall-through reads vs ranged GETs.
"""
