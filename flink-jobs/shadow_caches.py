"""Entry point of the PyFlink job: Kafka `cachescope.events` → shadow caches → ClickHouse.

The job itself is runners.flink (an adapter around the processing core); this file is
what `flink run -py` and the FlinkDeployment's PythonDriver start.
"""

from runners.flink import main

if __name__ == "__main__":
    main()
