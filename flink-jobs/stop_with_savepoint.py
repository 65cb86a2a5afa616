"""Stops the shadow-cache job with a savepoint, through Flink's REST API (PyFlink's Python client
fails at stop-with-savepoint), and prints the savepoint's path: resume from it with
`RESTORE=PATH flink-jobs/submit.sh …` (a new parallelism, image or flush setting).

    python stop_with_savepoint.py JOBMANAGER_HOST:PORT [TARGET_DIR]

TARGET_DIR defaults to the cluster's execution.checkpointing.savepoint-dir. Standard library
only: it runs in the Flink image as in a checkout. Exit 1 with one line when it cannot.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request

NAME = "cachescope shadow caches"


def call(rest: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(f"http://{rest}{path}", data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="GET" if body is None else "POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def stop_with_savepoint(rest: str, target: str | None = None, poll_s: float = 0.5) -> str:
    """The savepoint's path once the job has stopped (RuntimeError with the reason otherwise)."""
    jobs = [j for j in call(rest, "/jobs/overview")["jobs"] if j["name"] == NAME and j["state"] == "RUNNING"]
    if len(jobs) != 1:
        raise RuntimeError(f"{len(jobs)} running jobs named '{NAME}' on {rest}: nothing to stop")
    job = jobs[0]["jid"]
    body = {"drain": False, **({"targetDirectory": target} if target else {})}
    trigger = call(rest, f"/jobs/{job}/stop", body)["request-id"]
    while True:  # a savepoint of large state takes as long as it takes; Flink reports its failure
        st = call(rest, f"/jobs/{job}/savepoints/{trigger}")
        if st["status"]["id"] == "COMPLETED":
            op = st["operation"]
            if "failure-cause" in op:
                raise RuntimeError(f"job {job} did not stop: {op['failure-cause'].get('stack-trace', '').splitlines()[0]}")
            break
        time.sleep(poll_s)
    # the savepoint is complete before the job has stopped: wait for that, so that a resubmission
    # right after (submit.sh does nothing while the job runs) resumes from it
    while call(rest, f"/jobs/{job}")["state"] not in ("FINISHED", "CANCELED", "FAILED"):
        time.sleep(poll_s)
    return op["location"]


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if not 1 <= len(argv) <= 2:
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 2
    try:
        print(stop_with_savepoint(argv[0], argv[1] if len(argv) > 1 else None))
    except (OSError, urllib.error.URLError, RuntimeError, KeyError, ValueError) as e:
        print(f"stop_with_savepoint: {argv[0]}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
