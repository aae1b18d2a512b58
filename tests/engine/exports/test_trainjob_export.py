"""distloop export --format trainjob: a Kubeflow Trainer v2 TrainJob and TrainingRuntime
that the published CRDs accept, whose pods each run their own rank's task."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from distloop.engine.export import export_cluster
from distloop.engine.exports import FORMATS, format_named
from distloop.engine.exports.base import SECURITY_NOTE, cluster_name
from distloop.engine.exports.pods import K8S_PORT, PROJECT_MOUNT
from distloop.engine.exports.trainjob import RANK_VAR
from distloop.engine.project_file import load_project_data
from distloop.engine.tf_config import parse_tf_config_text
from support.distloop_testing import distloop, synthetic_project

CRDS = Path(__file__).parents[2] / "data" / "kubeflow"
PS_CLUSTER = {
    "chief": ["head.example.org:2222"],
    "worker": ["node1.example.org:2222", "node2.example.org:2222"],
    "ps": ["node1.example.org:2223"],
}


def strict(schema: Any) -> Any:
    """The CRD's schema with every object closed: the API server silently prunes a field a
    structural schema does not name, so a misspelled field would vanish, not fail."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        closed["additionalProperties"] = False
    return closed


def validator(kind: str) -> jsonschema.Draft4Validator:
    """The OpenAPI v3 schema of ``kind``'s v1alpha1 version, from its shipped CRD."""
    crd = yaml.safe_load((CRDS / f"trainer.kubeflow.org_{kind.lower()}s.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    assert crd["spec"]["names"]["kind"] == kind
    return jsonschema.Draft4Validator(strict(version["schema"]["openAPIV3Schema"]))


def project_data(strategy: str, cluster: dict[str, list[str]]) -> dict:
    data = synthetic_project(1, steps=10)
    data["name"] = f"TrainJob test: {strategy}"
    data["strategy"] = {"kind": strategy}
    first = next(iter(cluster))
    data["tf_config"] = {"cluster": cluster, "task": {"type": first, "index": 0}}
    return data


def exported(tmp_path: Path, strategy: str, cluster: dict, **volumes: str) -> list[dict]:
    project = load_project_data(project_data(strategy, cluster))
    export_cluster(project, tmp_path, "trainjob", image="registry.example/distloop:1.0", **volumes)
    return list(yaml.safe_load_all((tmp_path / "trainjob.yaml").read_text()))


@pytest.mark.parametrize(
    ("strategy", "cluster"),
    [
        ("parameter_server", PS_CLUSTER),
        ("multi_worker_mirrored", {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}),
    ],
)
@pytest.mark.parametrize("volumes", [{}, {"runs_volume": "runs", "data_volume": "data"}])
def test_the_trainjob_and_its_runtime_validate_against_the_trainer_v2_crds(
    tmp_path: Path, strategy: str, cluster: dict, volumes: dict
) -> None:
    documents = exported(tmp_path, strategy, cluster, **volumes)
    assert [d["kind"] for d in documents] == [
        "ConfigMap",
        "NetworkPolicy",
        "TrainingRuntime",
        "TrainJob",
    ]
    _, policy, runtime, trainjob = documents
    for document in (runtime, trainjob):
        assert document["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
        errors = [e.message for e in validator(document["kind"]).iter_errors(document)]
        assert errors == [], document["kind"]
    count = sum(len(hosts) for hosts in cluster.values())
    name = cluster_name(load_project_data(project_data(strategy, cluster)))
    assert trainjob["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": name,
    }
    assert trainjob["spec"]["trainer"]["numNodes"] == count
    assert runtime["spec"]["mlPolicy"] == {"numNodes": count}  # no framework: TF_CONFIG is ours
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert job["template"]["metadata"]["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
    }
    pod = job["template"]["spec"]["template"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert "SECURITY" in (tmp_path / "trainjob.yaml").read_text().splitlines()[1]


def test_the_validator_refuses_what_the_api_server_would_drop_or_refuse(tmp_path: Path) -> None:
    _, _, runtime, trainjob = exported(tmp_path, "parameter_server", PS_CLUSTER)
    trainjob["spec"]["trainer"]["numNode"] = 4  # misspelled: pruned by the API server
    runtime["spec"]["mlPolicy"]["numNodes"] = "4"
    assert any("numNode" in e.message for e in validator("TrainJob").iter_errors(trainjob))
    assert list(validator("TrainingRuntime").iter_errors(runtime))


@pytest.mark.parametrize("rank", range(5))
def test_each_pod_runs_its_rank_s_task_with_that_task_s_tf_config(tmp_path: Path, rank) -> None:
    """The container's own entry, run by sh as in the pod: the ConfigMap's files at their
    mount, the rank from the Job's completion index, a stand-in ``distloop`` on PATH."""
    documents = exported(tmp_path / "out", "parameter_server", PS_CLUSTER)
    config_map, _, runtime, _ = documents
    mount = tmp_path / "etc-distloop"
    mount.mkdir()
    for key, text in config_map["data"].items():
        (mount / key).write_text(text)
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    (container,) = job["template"]["spec"]["template"]["spec"]["containers"]
    (rank_env,) = container["env"]
    assert rank_env["name"] == RANK_VAR
    assert rank_env["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "distloop").write_text('#!/bin/sh\nprintf "%s\\n" "$TF_CONFIG" "$@"\n')
    (bin_dir / "distloop").chmod(0o755)
    entry = container["command"][2].replace(PROJECT_MOUNT, str(mount))
    result = subprocess.run(
        [*container["command"][:2], entry],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", RANK_VAR: str(rank)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if rank == 4:  # one pod more than the cluster has tasks runs nothing
        assert result.returncode != 0 and result.stdout == ""
        return
    assert result.returncode == 0, result.stderr
    tf_config, *args = result.stdout.splitlines()
    config = parse_tf_config_text(tf_config)
    task = ["chief:0", "worker:0", "worker:1", "ps:0"][rank]
    assert str(config.task) == task
    name = cluster_name(load_project_data(project_data("parameter_server", PS_CLUSTER)))
    assert config.address(config.task) == f"{name}-node-0-{rank}.{name}:{K8S_PORT}"
    addresses = [config.address(t) for t in config.tasks()]
    assert addresses == [f"{name}-node-0-{r}.{name}:{K8S_PORT}" for r in range(4)]
    assert args == [
        "run",
        f"{mount}/project.json",
        "--out",
        f"/var/lib/distloop/runs/{name}/{task.replace(':', '-')}",
    ]
    assert json.loads((tmp_path / "out" / "project.json").read_text())["tf_config"]["cluster"] == (
        config.cluster
    )


def test_trainjob_is_one_registered_format_beside_tfjob() -> None:
    assert FORMATS.index("tfjob") < FORMATS.index("trainjob")
    trainjob = format_named("trainjob")
    assert trainjob.pods and trainjob.needs_tf_config
    assert "Trainer v2" in trainjob.description and "tfjob" in trainjob.description


def test_cli_exports_a_trainjob_with_its_warnings(tmp_path: Path) -> None:
    data = project_data("multi_worker_mirrored", {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]})
    data["data"] = {
        "source": "csv",
        "label_column": "y",
        "global_batch_size": 32,
        "path": str(tmp_path / "train.csv"),
    }
    project = tmp_path / "project.json"
    project.write_text(json.dumps(data))
    result = distloop(
        "export", str(project), "--format", "trainjob", "--out", str(tmp_path / "out"),
        "--runs-volume", "runs",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert str(tmp_path / "out" / "trainjob.yaml") in result.stdout.split()
    stderr = " ".join(result.stderr.split())
    assert SECURITY_NOTE in stderr
    assert f"warning: data.path: {tmp_path / 'train.csv'} is a path on this machine" in stderr
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "kubectl apply -f trainjob.yaml" in readme and "export `tfjob`" in readme
