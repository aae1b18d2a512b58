"""distloop export: every format parses, and every task gets its own, correct TF_CONFIG."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from distloop.engine.code_text import inert
from distloop.engine.export import export_cluster
from distloop.engine.exports import FORMATS
from distloop.engine.exports.base import SECURITY_NOTE, cluster_name
from distloop.engine.exports.pods import DEFAULT_IMAGE, K8S_PORT, POD_NAME_VAR, to_yaml
from distloop.engine.exports.storage import DATA_MOUNT, RUNS_MOUNT, storage_notes
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project, load_project_data
from distloop.engine.tf_config import parse_tf_config_text
from hypothesis import given, settings
from hypothesis import strategies as st
from support.distloop_testing import (
    HOSTILE_TEXTS,
    assert_inert_export,
    distloop,
    synthetic_project,
    text_project,
)

CLUSTER = {
    "chief": ["head.example.org:2222"],
    "worker": ["node1.example.org:2222", "node2.example.org:2222"],
    "ps": ["node1.example.org:2223"],
}
TASKS = ["chief:0", "worker:0", "worker:1", "ps:0"]


def ps_project_data() -> dict:
    data = synthetic_project(1, steps=10)
    data["name"] = "Export test: PS"
    data["strategy"] = {"kind": "parameter_server"}
    data["tf_config"] = {"cluster": CLUSTER, "task": {"type": "chief", "index": 0}}
    return data


@pytest.fixture
def project():
    return load_project_data(ps_project_data())


def tasks_of(configs: list[str]) -> dict[str, dict]:
    """TF_CONFIG texts by task name, each checked by the same rules as any other."""
    parsed = [parse_tf_config_text(text) for text in configs]
    return {str(c.task): c.cluster for c in parsed}


def test_json_gives_one_tf_config_per_task(project, tmp_path) -> None:
    files = export_cluster(project, tmp_path, "json")
    configs = sorted((tmp_path / "tf_config").glob("*.json"))
    assert [p.name for p in configs] == sorted(
        ["chief-0.json", "worker-0.json", "worker-1.json", "ps-0.json"]
    )
    found = tasks_of([p.read_text() for p in configs])
    assert sorted(found) == sorted(TASKS)
    assert all(cluster == CLUSTER for cluster in found.values())
    assert tmp_path / "README.md" in files
    exported = load_project(tmp_path / "project.json")
    assert exported.tf_config.cluster == CLUSTER


def test_shell_scripts_run_each_host_s_tasks_and_pass_bash_n(project, tmp_path) -> None:
    export_cluster(project, tmp_path, "shell")
    scripts = sorted(tmp_path.glob("run-*.sh"))
    assert [p.name for p in scripts] == [
        "run-head.example.org.sh",
        "run-node1.example.org.sh",
        "run-node2.example.org.sh",
    ]
    configs, per_script = [], {}
    for script in scripts:
        subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
        text = script.read_text()
        assert text.startswith("#!/usr/bin/env bash")
        assert script.stat().st_mode & 0o111
        found = re.findall(
            r"^TF_CONFIG=(\S+) \\\n  distloop run project.json --task (\S+)", text, re.M
        )
        per_script[script.name] = [task for _, task in found]
        for value, task in found:
            (config,) = shlex.split(value)
            configs.append(config)
            assert str(parse_tf_config_text(config).task) == task
    assert per_script["run-node1.example.org.sh"] == ["worker:0", "ps:0"]
    assert sorted(tasks_of(configs)) == sorted(TASKS)


def test_kubernetes_manifests_parse_and_give_each_pod_its_tf_config(project, tmp_path) -> None:
    export_cluster(project, tmp_path, "k8s", image="registry.example/distloop:1.0")
    documents = list(yaml.safe_load_all((tmp_path / "kubernetes.yaml").read_text()))
    kinds = [d["kind"] for d in documents]
    assert kinds == ["ConfigMap", "Service", "NetworkPolicy", "Job", "Job", "Job", "Job"]
    name = cluster_name(project)
    assert name == "distloop-export-test-ps"

    config_map, service, policy, *jobs = documents
    assert load_project_data(json.loads(config_map["data"]["project.json"])).name == project.name
    assert service["spec"]["clusterIP"] == "None"
    assert service["metadata"]["name"] == name
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": selector}}]}]

    configs = []
    for job in jobs:
        pod = job["spec"]["template"]
        assert pod["metadata"]["labels"]["distloop/cluster"] == name
        assert pod["spec"]["subdomain"] == name
        (container,) = pod["spec"]["containers"]
        assert container["image"] == "registry.example/distloop:1.0"
        (env,) = container["env"]
        config = parse_tf_config_text(env["value"])
        configs.append(env["value"])
        task = str(config.task)
        assert container["command"][:5] == [
            "distloop",
            "run",
            "/etc/distloop/project.json",
            "--task",
            task,
        ]
        assert pod["spec"]["hostname"] == task.replace(":", "-")
        assert job["metadata"]["name"] == f"{name}-{task.replace(':', '-')}"
    found = tasks_of(configs)
    assert sorted(found) == sorted(TASKS)
    expected = {
        job: [f"{job}-{i}.{name}:{K8S_PORT}" for i in range(len(hosts))]
        for job, hosts in CLUSTER.items()
    }
    assert all(cluster == expected for cluster in found.values())


def test_tfjob_manifest_has_the_replica_counts(project, tmp_path) -> None:
    export_cluster(project, tmp_path, "tfjob")
    documents = list(yaml.safe_load_all((tmp_path / "tfjob.yaml").read_text()))
    tfjob = documents[-1]
    assert (tfjob["apiVersion"], tfjob["kind"]) == ("kubeflow.org/v1", "TFJob")
    specs = tfjob["spec"]["tfReplicaSpecs"]
    assert {kind: spec["replicas"] for kind, spec in specs.items()} == {
        "Chief": 1,
        "Worker": 2,
        "PS": 1,
    }
    for spec in specs.values():
        (container,) = spec["template"]["spec"]["containers"]
        assert container["name"] == "tensorflow"  # the operator looks for this name
        assert container["image"] == DEFAULT_IMAGE
        assert "TF_CONFIG" not in str(container.get("env"))  # the operator sets it itself
    assert [d["kind"] for d in documents[:-1]] == ["ConfigMap", "NetworkPolicy"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_file_but_json_carries_the_security_note(project, tmp_path, fmt) -> None:
    files = export_cluster(project, tmp_path, fmt)
    for path in files:
        if path.suffix != ".json":
            flat = " ".join(path.read_text().replace("#", " ").split())
            assert SECURITY_NOTE in flat, path.name


def test_export_needs_a_runnable_cluster(tmp_path) -> None:
    data = synthetic_project(1)
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    with pytest.raises(ProblemsError, match="export needs a cluster"):
        export_cluster(load_project_data(data), tmp_path, "json")
    data["tf_config"] = {
        "cluster": {"worker": ["a:1"], "evaluator": ["b:1"]},
        "task": {"type": "worker"},
    }
    with pytest.raises(ProblemsError, match="evaluator"):
        export_cluster(load_project_data(data), tmp_path, "shell")


def test_cli_export_with_an_imported_tf_config(tmp_path) -> None:
    data = synthetic_project(1)
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    project = tmp_path / "project.json"
    project.write_text(json.dumps(data))
    tf_config = tmp_path / "tf_config.json"
    cluster = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}
    tf_config.write_text(json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))

    result = distloop(
        "export", str(project), "--format", "shell", "--out", str(tmp_path / "out"),
        "--tf-config", str(tf_config),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "unauthenticated" in result.stderr
    written = result.stdout.split()
    assert str(tmp_path / "out" / "run-10.0.0.2.sh") in written
    assert load_project(tmp_path / "out" / "project.json").tf_config.cluster == cluster

    missing = distloop("export", str(project), "--format", "k8s", "--out", str(tmp_path / "k"))
    assert missing.returncode == 1 and "export needs a cluster" in missing.stderr
    assert "Traceback" not in missing.stderr


def csv_cluster_data(base: Path) -> dict:
    """Two workers reading a CSV by an absolute path and validation data by a relative one."""
    data = synthetic_project(1, steps=10)
    data["name"] = "Export test: CSV"
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {
        "cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]},
        "task": {"type": "worker", "index": 0},
    }
    csv = {"source": "csv", "label_column": "y", "global_batch_size": 32}
    data["data"] = {**csv, "path": str(base / "data" / "train.csv")}
    data["evaluation"] = {"every": 5, "source": {**csv, "path": "val/val.csv"}}
    return data


def pods(documents: list[dict]) -> list[dict]:
    """Every pod template of the manifests (one per Job, one per TFJob replica type)."""
    specs = []
    for document in documents:
        if document["kind"] == "Job":
            specs.append(document["spec"]["template"]["spec"])
        elif document["kind"] == "TFJob":
            replicas = document["spec"]["tfReplicaSpecs"].values()
            specs += [replica["template"]["spec"] for replica in replicas]
        elif document["kind"] == "TrainingRuntime":
            jobs = document["spec"]["template"]["spec"]["replicatedJobs"]
            specs += [job["template"]["spec"]["template"]["spec"] for job in jobs]
    return specs


def manifest_documents(folder: Path, fmt: str) -> list[dict]:
    name = "kubernetes.yaml" if fmt == "k8s" else f"{fmt}.yaml"
    return list(yaml.safe_load_all((folder / name).read_text()))


@pytest.mark.parametrize("fmt", ["k8s", "tfjob", "trainjob"])
def test_volumes_keep_the_run_folders_and_hold_the_data(tmp_path, fmt) -> None:
    base = tmp_path / "me"
    project = load_project_data(csv_cluster_data(base))
    out = tmp_path / "out"
    export_cluster(
        project,
        out,
        fmt,
        base_dir=base / "proj",
        runs_volume="distloop-runs",
        data_volume="training-data.v2",
    )
    documents = manifest_documents(out, fmt)
    exported = load_project(out / "project.json")
    in_config_map = json.loads(documents[0]["data"]["project.json"])
    # The files the project reads are on the data volume, below their common folder.
    assert exported.data.path == f"{DATA_MOUNT}/data/train.csv"
    assert exported.evaluation.source.path == f"{DATA_MOUNT}/proj/val/val.csv"
    assert in_config_map["data"]["path"] == exported.data.path
    run_dirs = []
    for pod in pods(documents):
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        assert volumes["runs"]["persistentVolumeClaim"] == {"claimName": "distloop-runs"}
        assert "emptyDir" not in volumes["runs"]
        assert volumes["data"]["persistentVolumeClaim"] == {
            "claimName": "training-data.v2",
            "readOnly": True,
        }
        (container,) = pod["containers"]
        mounts = {mount["name"]: mount for mount in container["volumeMounts"]}
        assert mounts["runs"]["mountPath"] == RUNS_MOUNT
        assert mounts["data"] == {"name": "data", "mountPath": DATA_MOUNT, "readOnly": True}
        command = container["command"]
        if fmt == "trainjob":  # one entry for every rank: the run folder is its task's
            command = shlex.split(command[-1].splitlines()[-1])
        run_dirs.append(command[command.index("--out") + 1])
    name = cluster_name(project)
    if fmt == "k8s":  # one folder per task, under the cluster's name: never shared
        assert run_dirs == [f"{RUNS_MOUNT}/{name}/worker-0", f"{RUNS_MOUNT}/{name}/worker-1"]
    elif fmt == "trainjob":
        assert run_dirs == [f"{RUNS_MOUNT}/{name}/$1"]
    else:  # every replica runs one command: its pod's name tells the folders apart
        assert run_dirs == [f"{RUNS_MOUNT}/$({POD_NAME_VAR})"]
        (container,) = pods(documents)[0]["containers"]
        assert {
            "name": POD_NAME_VAR,
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
        } in (container["env"])
    readme = (out / "README.md").read_text()
    assert "## Before you start" in readme
    assert "copy it into the claim as data/train.csv" in readme
    assert "the run folders are in each pod's emptyDir" not in readme


@pytest.mark.parametrize("fmt", ["k8s", "tfjob", "trainjob"])
def test_without_volumes_the_export_says_what_is_lost_and_what_is_missing(tmp_path, fmt) -> None:
    base = tmp_path / "me"
    project = load_project_data(csv_cluster_data(base))
    out = tmp_path / "out"
    export_cluster(project, out, fmt, base_dir=base / "proj")
    for pod in pods(manifest_documents(out, fmt)):
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        assert volumes["runs"] == {"name": "runs", "emptyDir": {}}
        assert "data" not in volumes
    # A pod reads project.json from a ConfigMap: a relative path would point into it.
    assert load_project(out / "project.json").evaluation.source.path == str(
        base / "proj" / "val" / "val.csv"
    )
    readme = " ".join((out / "README.md").read_text().split())
    assert "the run folders are in each pod's emptyDir" in readme
    assert f"data.path: {base / 'data' / 'train.csv'} is a path on this machine" in readme
    assert "evaluation.source.path" in readme


def test_hosts_are_told_where_the_data_must_be(tmp_path) -> None:
    base = tmp_path / "me"
    project = load_project_data(csv_cluster_data(base))
    notes = storage_notes(project, "shell", base_dir=base / "proj")
    assert notes == [
        f"data.path: {base / 'data' / 'train.csv'} is a path on this machine: every host "
        "needs it there",
        f"evaluation.source.path: val/val.csv is relative to project.json: copy "
        f"{base / 'proj' / 'val' / 'val.csv'} there, beside the exported project.json, on "
        "every host",
    ]
    seed = load_project_data(ps_project_data())  # synthetic data, no files
    assert storage_notes(seed, "json") == []


@pytest.mark.parametrize(
    ("fmt", "claims", "error"),
    [
        ("k8s", {"runs_volume": "Runs_Claim"}, "runs volume: 'Runs_Claim' is not a Kubernetes"),
        ("tfjob", {"data_volume": "-data"}, "data volume: '-data' is not a Kubernetes name"),
        ("tfjob", {"data_volume": "d" * 254}, "at most 253 characters"),
        (
            "shell",
            {"runs_volume": "runs"},
            "a runs volume is for the k8s, tfjob and trainjob formats",
        ),
    ],
)
def test_volume_names_are_kubernetes_names(project, tmp_path, fmt, claims, error) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        export_cluster(project, tmp_path / "out", fmt, **claims)
    assert not (tmp_path / "out").exists()


def test_cli_export_warns_about_local_paths_and_takes_volumes(tmp_path) -> None:
    base = tmp_path / "me"
    (base / "proj").mkdir(parents=True)
    project = base / "proj" / "project.json"
    project.write_text(json.dumps(csv_cluster_data(base)))
    plain = distloop("export", str(project), "--format", "k8s", "--out", str(tmp_path / "a"))
    assert plain.returncode == 0, plain.stderr
    warnings = [line for line in plain.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 3  # the emptyDir, the data file, the validation file
    assert "the run folders are in each pod's emptyDir" in warnings[0]
    assert f"data.path: {base / 'data' / 'train.csv'} is a path on this machine" in warnings[1]

    with_volumes = distloop(
        "export", str(project), "--format", "tfjob", "--out", str(tmp_path / "b"),
        "--runs-volume", "runs", "--data-volume", "data",
    )  # fmt: skip
    assert with_volumes.returncode == 0, with_volumes.stderr
    assert "emptyDir" not in with_volumes.stderr
    assert "copy it into the claim as data/train.csv" in with_volumes.stderr
    (tfjob,) = [d for d in manifest_documents(tmp_path / "b", "tfjob") if d["kind"] == "TFJob"]
    claims = {
        volume["persistentVolumeClaim"]["claimName"]
        for spec in pods([tfjob])
        for volume in spec["volumes"]
        if "persistentVolumeClaim" in volume
    }
    assert claims == {"runs", "data"}

    bad = distloop(
        "export", str(project), "--format", "k8s", "--out", str(tmp_path / "c"),
        "--runs-volume", "My Runs",
    )  # fmt: skip
    assert bad.returncode == 2 and "'My Runs' is not a Kubernetes name" in bad.stderr
    wrong_format = distloop(
        "export", str(project), "--format", "shell", "--out", str(tmp_path / "d"),
        "--data-volume", "data",
    )  # fmt: skip
    assert wrong_format.returncode == 2
    assert "--data-volume apply to --format k8s, tfjob and trainjob" in wrong_format.stderr
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
_lines = st.lists(_text, min_size=2, max_size=4).map("\n".join)  # literal blocks, or not
_scalars = st.none() | st.booleans() | st.integers() | _text | _lines
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_text | _lines, _values, max_size=5))
def test_yaml_emitter_round_trips_through_a_yaml_parser(document) -> None:
    assert yaml.safe_load(to_yaml(document)) == document


# --- hostile input: hosts, images and project texts never become code ---------------------

HOSTILE_HOSTS = (
    "node1\n:2222",  # a label may not end in a line break ($ matched before it)
    "node1\n.touch-MARKER:2222",
    "[fe80::1%\ntouch MARKER\n]:2222",  # Python's ipaddress takes any zone text
    "[fe80::1%$(touch MARKER)]:2222",
    "[fe80::1%a b]:2222",
)


def cluster_project(tmp_path, name: str = "hostile") -> Path:
    data = synthetic_project(1)
    data["name"] = name
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {"cluster": {"worker": ["h1:2222", "h2:2222"]}, "task": {"type": "worker"}}
    path = tmp_path / "project.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_a_host_with_a_line_break_or_shell_text_is_refused(host: str) -> None:
    config = {"cluster": {"worker": ["h1:2222", host]}, "task": {"type": "worker"}}
    with pytest.raises(ProblemsError) as refused:
        parse_tf_config_text(json.dumps(config))
    assert [p.path for p in refused.value.problems] == ["cluster.worker.1"]


def test_cli_export_refuses_a_hostile_host_and_writes_nothing(tmp_path) -> None:
    """Before, the shell format wrote the zone's line break into a comment of run-*.sh,
    and the line after it ran as a command when the script ran. (Every format reads the
    cluster through the same parser.)"""
    tf_config = tmp_path / "tf_config.json"
    host = "[fe80::1%\ntouch marker\n]:2222"  # no '/': ipaddress refuses that in a zone
    tf_config.write_text(json.dumps({"cluster": {"worker": [host]}, "task": {"type": "worker"}}))
    out = tmp_path / "out"
    result = distloop(
        "export", str(cluster_project(tmp_path)), "--format", "shell", "--out", str(out),
        "--tf-config", str(tf_config),
    )  # fmt: skip
    assert result.returncode == 1, result.stdout
    assert "zone" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_cli_export_refuses_an_image_that_is_not_an_image_reference(tmp_path) -> None:
    out = tmp_path / "out"
    result = distloop(
        "export", str(cluster_project(tmp_path)), "--format", "k8s", "--out", str(out),
        "--image", "distloop:latest\ncommand: [sh]",
    )  # fmt: skip
    assert result.returncode == 1, result.stdout
    assert result.stderr.startswith("distloop: export: 'distloop:latest\\ncommand: [sh]' is not")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists()


@pytest.mark.parametrize("fmt", ["k8s", "tfjob", "trainjob"])
@pytest.mark.parametrize("image", ["x y", "Distloop:1", "", "x:", "-x", "a/b/", "x@sha256:ab"])
def test_an_image_that_is_not_an_image_reference_is_refused(tmp_path, fmt, image) -> None:
    with pytest.raises(ProblemsError, match="not a container image reference"):
        export_cluster(text_project(), tmp_path / "out", fmt, image=image)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "image",
    ["distloop", "registry.example.org:5000/team/dist-loop_x:1.2", f"a/b@sha256:{'0' * 64}"],
)
def test_image_references_are_taken_as_written(tmp_path, image) -> None:
    export_cluster(text_project(), tmp_path, "tfjob", image=image)
    tfjob = list(yaml.safe_load_all((tmp_path / "tfjob.yaml").read_text()))[-1]
    (container,) = tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert container["image"] == image


@pytest.mark.parametrize("source", ["csv", "tfrecord"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_hostile_project_texts_are_data_in_every_export_format(tmp_path, fmt, text, source):
    files = assert_inert_export(text_project(text, source), tmp_path / "out", fmt)
    readme = (tmp_path / "out" / "README.md").read_text()
    assert f"# Distloop cluster export: {inert(text)}\n" in readme
    assert "PWNED" not in "".join(p.read_text() for p in files if p.suffix == ".sh")
