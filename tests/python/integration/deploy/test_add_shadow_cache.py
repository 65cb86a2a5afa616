"""deploy/README.md's "Adding a policy or a size without losing state", executed as written: the
bash block of that section is taken from the README and run against the local cluster while the
first job runs. The new shadow cache's rows appear; the first job's rows go on without a gap or
a double count: every table equals the core run directly on the same accesses with both
configurations.
"""

from __future__ import annotations

import os
import re
import subprocess

import pandas as pd
import pytest

from cachescope.config import load_config
from support.clusters import REPO, Halves, cluster, flink_cluster, submit, submit_env, wait_rows  # noqa: F401 (fixtures)
from support.services import topic_items
from test_flink_job import KEYS, assert_store_equals, database, expected  # noqa: F401 (fixture)

pytestmark = pytest.mark.services
SECTION = "### Adding a policy or a size without losing state"


def readme_block() -> str:
    text = (REPO / "deploy" / "README.md").read_text()
    section = text[text.index(SECTION):]
    section = section[:section.index("\n### ", len(SECTION))]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) == 1, f"the section should hold one bash block, not {len(blocks)}"
    return blocks[0]


def test_the_readmes_procedure_adds_a_shadow_cache_beside_the_running_job(
        kafka, clickhouse, database, cluster, kafka_topic, tmp_path):
    stream = Halves(tmp_path, kafka.bootstrap, kafka_topic, 12_000, seed=31)
    url = f"{clickhouse.url.rsplit('/', 1)[0]}/{database.database}"
    first = submit(cluster, tmp_path, kafka.bootstrap, url, kafka_topic, "--parallelism", "1")
    wait_rows(cluster, first, database, {"access_events": stream.first})

    env = dict(submit_env(cluster, tmp_path), FLINK_REST=cluster.rest, KAFKA_BOOTSTRAP=kafka.bootstrap,
               CLICKHOUSE_URL=url, TOPIC=kafka_topic, CACHESCOPE_VAR_DIR=str(tmp_path / "var"))
    env.pop("CHECKPOINT_DIR")
    p = subprocess.run(["bash", "-euo", "pipefail", "-c", readme_block()], cwd=REPO, env=env,
                       capture_output=True, text=True)
    print(p.stdout[-3000:], p.stderr[-3000:], flush=True)
    assert p.returncode == 0, p.stderr[-4000:]
    second = re.search(r"JobID ([0-9a-f]{32})", p.stdout).group(1)
    names = {j["jid"]: j["name"] for j in cluster.jobs()}
    assert names == {first: "cachescope shadow caches", second: "cachescope shadow caches 2"}
    again = subprocess.run(["bash", "-euo", "pipefail", "-c", readme_block()], cwd=REPO, env=env,
                           capture_output=True, text=True)
    assert again.returncode == 0 and "already runs" in again.stdout, again.stdout + again.stderr

    stream.rest()  # the stream goes on: both jobs take the second half
    events = topic_items(kafka.bootstrap, kafka_topic)
    old = expected(events, load_config().pipeline, finish=False)
    new = expected(events, load_config(tmp_path / "var" / "shadow-caches-2" / "pipeline.yaml").pipeline,
                   finish=False)
    assert set(new["efficiency"]["policy"]) == {"lru"}
    want = {t: (pd.concat([old[t], new[t]]).drop_duplicates(KEYS[t]).sort_values(KEYS[t]).reset_index(drop=True)
                if t in new else old[t]) for t in old}
    for job in (first, second):
        wait_rows(cluster, job, database, {t: len(df) for t, df in want.items()})
    assert_store_equals(database, want)
    assert len(want["efficiency"]) == len(old["efficiency"]) + len(new["efficiency"])  # no key shared
    assert os.path.exists(tmp_path / "var" / "shadow-caches-2" / "checkpoints")
