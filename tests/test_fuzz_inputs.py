"""Property-based tests: whatever a user (or a broken disk) hands the loaders, only
validation problems come out, never another exception.

Counts (reported in the README): 300 random texts and 600 mutated examples for
project files, 300 random texts and 300 mutated clusters for TF_CONFIG.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from distloop.engine.config import load_project_data, load_project_text
from distloop.engine.examples import example_names
from distloop.engine.problems import ProblemsError
from distloop.engine.tf_config import parse_tf_config_text
from distloop_testing import example_data
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every location inside a JSON document, so a mutation can hit any of them."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            found += _paths(child, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: dict) -> dict:
    """A valid document with a few of its values replaced, removed, or keys added."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(json_values)
    return doc


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
