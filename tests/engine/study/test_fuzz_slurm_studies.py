"""Property-based tests of what a Slurm environment and a study folder can hand Distloop:
whatever they say, one problem (or one unreadable line) comes out, never another
exception, never without end.

Counts (reported in docs/reliability.md): 400 Slurm environments (node lists of random names and
ranges, huge ones included, tasks per node, task ids, and random text for each), 300
random texts and 300 mutated space files, and 60 study databases changed by random
SQL (views, triggers, tables, values of any text or size) or random bytes.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from distloop.engine.cluster_layout.slurm import MAX_TASKS, tf_config_from_slurm
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project_data
from distloop.engine.study.folders import read_entry
from distloop.engine.study.results import StudyUnreadable, read_results
from distloop.engine.study.space import parse_space
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.distloop_testing import synthetic_project
from support.fuzzing import mutated
from support.study_folders import SPACE, optuna_study_folder

MESSAGE_CHARS = 2000
"""Longer than any refusal: a message quoting a hostile value whole is a failure."""

numbers = st.integers(min_value=0, max_value=10**6) | st.integers(min_value=0, max_value=10**40)
ranges = st.lists(
    st.tuples(numbers, numbers).map(lambda pair: f"{min(pair)}-{max(pair)}") | numbers.map(str),
    min_size=1,
    max_size=3,
).map(",".join)
names = st.lists(
    st.from_regex(r"[a-z]{1,3}", fullmatch=True) | ranges.map(lambda r: f"[{r}]"),
    min_size=1,
    max_size=4,
).map("".join)
node_lists = st.lists(names, min_size=1, max_size=6).map(",".join) | st.text(max_size=60)
tasks_per_node = st.lists(
    st.tuples(numbers, st.none() | numbers).map(
        lambda pair: str(pair[0]) if pair[1] is None else f"{pair[0]}(x{pair[1]})"
    ),
    min_size=1,
    max_size=4,
).map(",".join) | st.text(max_size=30)
task_ids = numbers.map(str) | st.text(max_size=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=node_lists,
    per_node=tasks_per_node,
    rank=task_ids,
    node_id=task_ids,
    kind=st.sampled_from(["multi_worker_mirrored", "parameter_server"]),
)
# found by this test in a run: 20 tasks on one badly named node said it 20 times
@example(
    nodes="00\x1f\x1f\x1f\U00012544",
    per_node="20",
    rank="0",
    node_id="0",
    kind="multi_worker_mirrored",
)
def test_any_slurm_environment_is_a_task_or_one_problem(
    nodes: str, per_node: str, rank: str, node_id: str, kind: str
) -> None:
    environ = {
        "SLURM_PROCID": rank,
        "SLURM_STEP_NODELIST": nodes,
        "SLURM_STEP_TASKS_PER_NODE": per_node,
        "SLURM_NODEID": node_id,
        "SLURM_LOCALID": "0",
    }
    try:
        config = tf_config_from_slurm(environ, kind)
    except ProblemsError as exc:
        assert len(str(exc)) < MESSAGE_CHARS
        return
    assert sum(len(tasks) for tasks in config.cluster.values()) <= MAX_TASKS


def _seed_project() -> Any:
    return load_project_data(synthetic_project(1, steps=10))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_any_space_text_is_a_space_or_problems(text: str) -> None:
    try:
        parse_space(text, _seed_project(), "space.json")
    except ProblemsError:
        return


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(SPACE))
def test_any_mutated_space_is_a_space_or_problems(doc: dict) -> None:
    try:
        parse_space(json.dumps(doc), _seed_project(), "space.json")
    except ProblemsError:
        return


@pytest.fixture(scope="module")
def study_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return optuna_study_folder(tmp_path_factory.mktemp("fuzz-study") / "study", trials=5)


values = (
    st.text(max_size=40)
    | st.integers(min_value=0, max_value=2**20).map(lambda n: "x" * n)
    | st.sampled_from(["NaN", "1e999", "-1", "COMPLETE", "{", "[]", "null"])
)
statements = st.one_of(
    st.sampled_from(
        [
            "DROP TABLE trials; CREATE VIEW trials AS WITH RECURSIVE r(a) AS "
            "(SELECT 1 UNION ALL SELECT a + 1 FROM r) SELECT a AS trial_id, a AS number, "
            "1 AS study_id, 'COMPLETE' AS state, NULL AS datetime_start, "
            "NULL AS datetime_complete FROM r;",
            "CREATE TRIGGER t AFTER INSERT ON trials BEGIN DELETE FROM studies; END;",
            "CREATE TABLE extra (x);",
            "DROP TABLE version_info;",
            "DROP TABLE studies;",
            "DELETE FROM studies;",
            "DELETE FROM trial_params;",
            "CREATE INDEX big ON trials (number, state);",
        ]
    ),
    st.tuples(
        st.sampled_from(
            [
                "UPDATE trial_params SET distribution_json = ?",
                "UPDATE trial_params SET param_value = ?",
                "UPDATE trial_params SET param_name = ?",
                "UPDATE trials SET state = ?",
                "UPDATE trials SET datetime_start = ?",
                "UPDATE trial_values SET value = ?",
                "UPDATE studies SET study_name = ?",
                "UPDATE version_info SET library_version = ?",
                "UPDATE trial_user_attributes SET value_json = ?",
            ]
        ),
        values,
    ),
)


def _changed_copy(template: Path, changes: list[Any], flips: list[tuple[int, int]]) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="fuzz-study-")) / "study"
    shutil.copytree(template, folder)
    database = folder / "study.db"
    connection = sqlite3.connect(database)
    try:
        for change in changes:
            try:
                if isinstance(change, str):
                    connection.executescript(change)
                else:
                    connection.execute(*change[:1], (change[1],))
            except sqlite3.Error:
                continue  # a change this file cannot take (a table already dropped)
        connection.commit()
    finally:
        connection.close()
    if flips:
        data = bytearray(database.read_bytes())
        for at, byte in flips:
            data[at % len(data)] = byte
        database.write_bytes(bytes(data))
    return folder


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.lists(statements, max_size=3),
    flips=st.lists(
        st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), max_size=4
    ),
)
# found by this test in runs: a text value crashed the reader; a complete trial without its
# end time crashed Optuna's own importance
@example(changes=[("UPDATE trial_values SET value = ?", "x")], flips=[])
@example(changes=[("UPDATE trials SET state = ?", "COMPLETE")], flips=[])
def test_any_changed_study_db_is_read_or_one_unreadable_line(
    study_template: Path, changes: list[Any], flips: list[tuple[int, int]]
) -> None:
    folder = _changed_copy(study_template, changes, flips)
    try:
        entry = read_entry(folder)
        assert len(entry.error) < MESSAGE_CHARS and "\n" not in entry.error
        try:
            read_results(folder)
        except StudyUnreadable as exc:
            assert len(str(exc)) < MESSAGE_CHARS and "\n" not in str(exc)
    finally:
        shutil.rmtree(folder.parent)
