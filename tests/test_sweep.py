"""Sweep expansion (TensorFlow-free): grids, random draws, names, and invalid combinations."""

from __future__ import annotations

import pytest
from distloop.engine.config import Project
from distloop.engine.examples import load_example
from distloop.engine.problems import ProblemsError
from distloop.engine.sweep import MAX_RUNS, expand, load_sweep_spec, sweep_points


@pytest.fixture
def seed() -> Project:
    return load_example("seed").model_copy(update={"name": "seed"})


def test_a_grid_runs_every_combination_in_order(seed: Project) -> None:
    spec = load_sweep_spec(
        {"learning_rates": [0.1, 0.01], "batch_sizes": [16, 32], "optimizers": ["sgd", "adam"]}
    )
    expansion = expand(seed, spec)
    assert expansion.rejected == []
    assert [p.name for p in expansion.projects] == [
        "seed lr=0.1 bs=16 sgd",
        "seed lr=0.1 bs=16 adam",
        "seed lr=0.1 bs=32 sgd",
        "seed lr=0.1 bs=32 adam",
        "seed lr=0.01 bs=16 sgd",
        "seed lr=0.01 bs=16 adam",
        "seed lr=0.01 bs=32 sgd",
        "seed lr=0.01 bs=32 adam",
    ]
    last = expansion.projects[-1]
    assert (last.optimizer.kind, last.optimizer.learning_rate) == ("adam", 0.01)
    assert last.data.global_batch_size == 32
    # Everything not swept is the base project's.
    assert last.model == seed.model and last.training == seed.training and last.loss == seed.loss


def test_unswept_values_and_optimizer_settings_are_kept(seed: Project) -> None:
    base = seed.model_copy(
        update={"optimizer": seed.optimizer.model_copy(update={"momentum": 0.5})}
    )
    kept, switched = expand(base, load_sweep_spec({"optimizers": ["sgd", "rmsprop"]})).projects
    assert kept.name == "seed sgd" and kept.optimizer == base.optimizer
    # Another optimizer takes the base's learning rate and its own defaults, not SGD's momentum.
    assert switched.optimizer.kind == "rmsprop"
    assert switched.optimizer.learning_rate == base.optimizer.learning_rate
    assert switched.optimizer.momentum == 0.0
    assert switched.data.global_batch_size == base.data.global_batch_size


def test_random_draws_are_reproducible_distinct_and_in_range(seed: Project) -> None:
    data = {
        "method": "random",
        "count": 12,
        "seed": 7,
        "learning_rate_range": [1e-4, 1e-1],
        "batch_sizes": [8, 16],
        "optimizers": ["adam", "sgd"],
    }
    points = sweep_points(load_sweep_spec(data))
    assert points == sweep_points(load_sweep_spec(data))
    assert points != sweep_points(load_sweep_spec({**data, "seed": 8}))
    assert len(points) == 12 and len(set(points)) == 12
    rates = [p.learning_rate for p in points]
    assert all(rate is not None and 1e-4 <= rate <= 1e-1 for rate in rates)
    assert all(float(f"{rate:.3g}") == rate for rate in rates)  # names show the value as run
    assert {p.batch_size for p in points} <= {8, 16}
    assert {p.optimizer for p in points} == {"adam", "sgd"}
    projects = expand(seed, load_sweep_spec(data)).projects
    assert [p.optimizer.learning_rate for p in projects] == rates


def test_random_over_lists_picks_distinct_combinations(seed: Project) -> None:
    spec = load_sweep_spec(
        {"method": "random", "count": 4, "learning_rates": [0.1, 0.01], "batch_sizes": [8, 16]}
    )
    points = sweep_points(spec)
    assert sorted((p.learning_rate, p.batch_size) for p in points) == [
        (0.01, 8),
        (0.01, 16),
        (0.1, 8),
        (0.1, 16),
    ]


def test_invalid_combinations_are_reported_and_the_rest_kept(seed: Project) -> None:
    two_replicas = seed.model_copy(
        update={"strategy": seed.strategy.model_copy(update={"cpu_replicas": 2})}
    )
    expansion = expand(two_replicas, load_sweep_spec({"batch_sizes": [1, 4]}))
    assert [p.name for p in expansion.projects] == ["seed bs=4"]
    (rejected,) = expansion.rejected
    assert rejected.name == "seed bs=1"
    assert str(rejected) == (
        "seed bs=1: data.global_batch_size: must be at least the number of replicas (2) "
        "so each gets an example"
    )


def test_a_long_base_name_is_cut_so_the_values_stay_in_the_name(seed: Project) -> None:
    long_name = seed.model_copy(update={"name": "x" * 200})
    (project,) = expand(long_name, load_sweep_spec({"learning_rates": [0.5]})).projects
    assert len(project.name) == 200 and project.name.endswith(" lr=0.5")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({}, ": name at least one value to sweep"),
        ({"learning_rates": [0]}, "learning_rates.0: Input should be greater than 0"),
        ({"learning_rates": [0.1, 0.1]}, "learning_rates: lists a value twice"),
        ({"batch_sizes": [0]}, "batch_sizes.0: Input should be greater than or equal to 1"),
        ({"batch_sizes": ["32"]}, 'batch_sizes.0: Input should be a valid integer, not "32"'),
        ({"optimizers": ["adamw"]}, "optimizers.0: Input should be 'sgd', 'adam'"),
        ({"method": "random", "batch_sizes": [8]}, "count: a random sweep needs the number"),
        ({"batch_sizes": [8], "count": 3}, "count: applies only to random"),
        ({"learning_rate_range": [0.001, 0.1]}, "learning_rate_range: applies only to random"),
        (
            {"method": "random", "count": 2, "learning_rate_range": [0.1, 0.01]},
            "learning_rate_range: low must be below high",
        ),
        (
            {"method": "random", "count": 3, "batch_sizes": [8, 16]},
            "count: only 2 different combinations exist",
        ),
        (
            {"learning_rates": [i / 100 for i in range(1, 101)], "batch_sizes": list(range(1, 12))},
            f"the grid has 1100 runs; at most {MAX_RUNS} are allowed",
        ),
        ({"batch_sizes": [8], "learing_rates": [0.1]}, "did you mean 'learning_rates'?"),
    ],
)
def test_a_bad_spec_names_the_field(data: dict, expected: str) -> None:
    with pytest.raises(ProblemsError) as caught:
        load_sweep_spec(data)
    assert expected in str(caught.value)
