"""The runners: thin adapters that feed the processing core (cachescope.core) and write its rows.

- `embedded`: `cachescope replay` — log files → parsers → GroupState per cache group → chDB, one process.
- `flink`: the PyFlink job (Kafka source, keying, keyed state, timers, side outputs);
  `flink-jobs/shadow_caches.py` is only its entry point.
"""
