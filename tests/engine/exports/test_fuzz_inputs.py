"""Property-based tests: whatever a user (or a broken disk) hands the loaders, only
validation problems come out, never another exception.

Counts (reported in docs/reliability.md): 300 random texts and 600 mutated examples for
project files, 300 random texts and 300 mutated clusters for TF_CONFIG; for exports,
40 projects whose free texts are all hostile (the script and every cluster format),
300 hosts and 150 images; and 60 calls of random files (random bytes, or a PNG or .npy
start followed by random bytes, named ``.npy``, ``.png``, ``.csv`` or ``.txt``) for
prediction: each input is answered.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from distloop.engine.code_text import inert
from distloop.engine.examples import example_names
from distloop.engine.export import export_cluster
from distloop.engine.exports import FORMATS
from distloop.engine.exports.pods import valid_image
from distloop.engine.prediction import PredictionProcess
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project_data, load_project_text
from distloop.engine.tf_config import parse_tf_config_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.distloop_testing import (
    HOSTILE_TEXTS,
    TEXT_FIELDS,
    assert_inert_export,
    assert_inert_script,
    example_data,
    model_run_folder,
    text_project,
    yaml_documents,
)
from support.fuzzing import mutated

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def only_problems(load, value) -> None:
    try:
        load(value)
    except ProblemsError as exc:
        assert exc.problems, "a ProblemsError must list its problems"
        for problem in exc.problems:
            assert isinstance(problem.message, str) and problem.message


@FUZZ
@given(st.text(max_size=300))
def test_project_loader_survives_any_text(text: str) -> None:
    only_problems(load_project_text, text)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(example_names()).flatmap(lambda name: mutated(example_data(name))))
def test_project_loader_survives_mutated_examples(doc: dict) -> None:
    only_problems(load_project_data, doc)
    only_problems(load_project_text, json.dumps(doc))


@FUZZ
@given(st.text(max_size=300))
def test_tf_config_parser_survives_any_text(text: str) -> None:
    only_problems(parse_tf_config_text, text)


CLUSTER = {
    "cluster": {
        "chief": ["host0:2222"],
        "worker": ["host1:2222", "host2:2222"],
        "ps": ["[::1]:2223"],
    },
    "task": {"type": "worker", "index": 1},
}


@FUZZ
@given(mutated(CLUSTER))
def test_tf_config_parser_survives_mutated_clusters(doc: dict) -> None:
    only_problems(parse_tf_config_text, json.dumps(doc))


# --- hostile text through every export format --------------------------------------------

free_texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(HOSTILE_TEXTS),
    st.lists(
        st.sampled_from(['"""', "'''", "\\", "\n", "\r", "\x00", "\u2028", "$(", "`", "#"])
    ).map("".join),
).filter(lambda text: text.strip() != "")  # a path or a column may not be blank


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(["csv", "tfrecord"]),
    texts=st.fixed_dictionaries({name: free_texts for name in TEXT_FIELDS}),
)
def test_hostile_texts_stay_data_in_the_script_and_every_export(
    source: str, texts: dict[str, str]
) -> None:
    texts["name"] = texts["name"][:200]
    try:
        project = text_project(source=source, **texts)
    except ProblemsError:
        return  # refused (a lone surrogate, two features of one name): nothing is exported
    assert_inert_script(project)
    with tempfile.TemporaryDirectory(prefix="distloop-inputs-") as folder:
        for fmt in FORMATS:
            assert_inert_export(project, Path(folder) / fmt, fmt)


addresses = st.builds(
    "{}{}:2222".format,
    st.sampled_from(["h2", "node1.example.org", "10.0.0.2", "[fe80::1%eth0]", "[::1", "h2."]),
    st.text(max_size=6) | st.sampled_from(["\n", "\n.x", "%\nx", "%a b]", "$(x)"]),
)


SHELL_LINES = 20
"""Lines of a launch script besides its three per task."""


@FUZZ
@given(host=addresses | st.text(max_size=30))
def test_any_host_is_refused_or_is_plain_text_in_launch_scripts(host: str) -> None:
    config = {"cluster": {"worker": ["h1:2222", host]}, "task": {"type": "worker"}}
    try:
        tf_config = parse_tf_config_text(json.dumps(config))
    except ProblemsError:
        return
    assert inert(host) == host and host.isascii(), host  # nothing a script would escape
    project = text_project().model_copy(update={"tf_config": tf_config})
    with tempfile.TemporaryDirectory(prefix="distloop-inputs-") as folder:
        for path in export_cluster(project, Path(folder), "shell"):
            if path.suffix == ".sh":
                subprocess.run(["bash", "-n", str(path)], check=True, timeout=30)
                lines = path.read_text().splitlines()
                tasks = sum("distloop run" in line for line in lines)
                assert len(lines) - 3 * tasks == SHELL_LINES  # no line added


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(image=st.text(max_size=40) | st.from_regex(r"[a-z0-9./:_@-]{1,40}", fullmatch=True))
def test_any_image_is_refused_or_is_the_pods_image(image: str) -> None:
    with tempfile.TemporaryDirectory(prefix="distloop-inputs-") as folder:
        try:
            export_cluster(text_project(), Path(folder), "k8s", image=image)
        except ProblemsError:
            assert not valid_image(image)
            return
        documents = yaml_documents((Path(folder) / "kubernetes.yaml").read_text())
        jobs = [d for d in documents if d["kind"] == "Job"]
        assert {job["spec"]["template"]["spec"]["containers"][0]["image"] for job in jobs} == {
            image
        }
        assert image.isascii() and inert(image) == image


PNG_START = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
NPY_START = b"\x93NUMPY\x01\x00"
file_bytes = st.one_of(
    st.binary(max_size=400),
    st.binary(max_size=200).map(lambda tail: PNG_START + tail),
    st.binary(max_size=200).map(lambda tail: NPY_START + tail),
)
random_files = st.lists(
    st.tuples(st.sampled_from([".npy", ".png", ".csv", ".txt"]), file_bytes),
    min_size=1,
    max_size=5,
)


@pytest.mark.slow
def test_prediction_answers_every_random_file(tmp_path: Path) -> None:
    """Through the process ``distloop predict`` and Try It use, kept warm for the whole
    property (one TensorFlow start): no failure of the whole call, no crash, and each
    file gets its predictions or its own line saying why not. The model is the digits
    example's (8x8 grey images, 10 classes), so random PNGs reach image decoding."""
    run_dir = model_run_folder(tmp_path / "run", example_data("digits"))
    process = PredictionProcess(run_dir)
    calls = itertools.count()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(random_files)
    def answers_each(files: list[tuple[str, bytes]]) -> None:
        folder = tmp_path / f"inputs{next(calls)}"
        folder.mkdir()
        paths = []
        for number, (suffix, contents) in enumerate(files):
            paths.append(folder / f"{number}{suffix}")
            paths[-1].write_bytes(contents)
        result = process.predict(paths)
        for path in map(str, paths):
            predicted = [p for p in result.predictions if p.input.startswith(f"{path}[")]
            refused = [error for error in result.errors if error.startswith(f"{path}: ")]
            assert (len(refused), bool(predicted)) in {(0, True), (1, False)}, path
        assert len(result.errors) <= len(paths)

    try:
        assert process.predict().model.input_shape == [8, 8, 1]  # type: ignore[union-attr]
        first = process.pid
        answers_each()
        assert process.pid == first  # never restarted: no input crashed it
    finally:
        process.close()
