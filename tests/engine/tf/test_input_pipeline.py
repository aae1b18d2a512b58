"""How batches reach the replicas, and the pipeline's speed options (cache, prefetch).

Splitting on the host must hand every replica exactly the examples TensorFlow's
distributed dataset hands it: the per-replica losses, not only their sum, are
compared, with an uneven split and a short last batch that leaves a replica empty.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from distloop.engine.project_file import load_project_data
from distloop.engine.tf.data import build_eval_data, build_training_data
from support.distloop_testing import run_engine, synthetic_project


def _uneven(method: str, **training) -> dict:
    """4 replicas, batches of 7 (2/2/2/1) and a last batch of 2 (1/1/0/0) every epoch."""
    data = synthetic_project(4, batch=7, per_replica_losses=True, **training)
    data["data"]["examples"] = 30
    data["data"]["shuffle_buffer"] = 30
    data["training"].pop("steps")
    data["training"].update(epochs=3, input_distribution=method)
    return data


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_split_on_host_gives_each_replica_what_the_distributed_dataset_gives(
    steps_per_execution: int,
) -> None:
    runs = {
        method: run_engine(
            load_project_data(_uneven(method, steps_per_execution=steps_per_execution)), None
        )
        for method in ("split_on_host", "distributed_dataset")
    }
    host, dataset = runs["split_on_host"], runs["distributed_dataset"]
    for run in runs.values():
        assert run["terminal"].status == "finished", run["terminal"]
    assert host["steps"] == dataset["steps"] == list(range(1, 16))
    np.testing.assert_allclose(host["losses"], dataset["losses"], rtol=1e-6)
    assert host["replica_losses"].shape == (15, 4)
    np.testing.assert_allclose(host["replica_losses"], dataset["replica_losses"], rtol=1e-6)
    # The short last batch of each epoch leaves the last two replicas without examples:
    # their loss is only their share of the regularization loss, the same for both.
    last = host["replica_losses"][4::5]
    np.testing.assert_array_equal(last[:, 2], last[:, 3])
    assert np.all(last[:, 0] > 10 * last[:, 2])


def test_auto_splits_on_the_host_when_the_replicas_are_cpus() -> None:
    run = run_engine(load_project_data(synthetic_project(2, steps=3)), None)
    assert run["terminal"].status == "finished", run["terminal"]
    (note,) = [m.text for m in run["logs"] if m.text.startswith("input distribution")]
    assert note == "input distribution: split_on_host (training.input_distribution is auto)"


def _pipeline_ops(dataset: tf.data.Dataset) -> list[str]:
    """The dataset ops of a pipeline, from the source to the last one."""
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(
        tf.raw_ops.DatasetToGraphV2(input_dataset=dataset._variant_tensor).numpy()
    )
    return [node.op for node in graph.node if "Dataset" in node.op]


def _project(steps: int = 10, **data_options) -> object:
    data = synthetic_project(1, steps=steps)
    data["data"].update(data_options)
    return load_project_data(data)


def test_cache_keeps_unshuffled_batches_and_shuffled_examples() -> None:
    """On a run of several epochs (a shorter one caches nothing: nothing is read twice)."""
    unshuffled = _project(1000, shuffle_buffer=0, cache=True)
    unshuffled_ops = _pipeline_ops(build_training_data(unshuffled).dataset)
    assert unshuffled_ops.index("CacheDatasetV2") > unshuffled_ops.index("BatchDatasetV2")
    shuffled = _pipeline_ops(build_training_data(_project(1000, cache=True)).dataset)
    assert shuffled.index("CacheDatasetV2") < shuffled.index("ShuffleDatasetV3")
    plain = _pipeline_ops(build_training_data(_project(1000)).dataset)
    assert "CacheDatasetV2" not in plain
    short = _pipeline_ops(build_training_data(_project(10, cache=True)).dataset)
    assert "CacheDatasetV2" not in short


def test_prefetch_is_tuned_fixed_or_off() -> None:
    def prefetch_sizes(**options) -> list[int]:
        dataset = build_training_data(_project(**options)).dataset
        graph = tf.compat.v1.GraphDef()
        graph.ParseFromString(
            tf.raw_ops.DatasetToGraphV2(input_dataset=dataset._variant_tensor).numpy()
        )
        constants = {
            node.name: tf.make_ndarray(node.attr["value"].tensor)
            for node in graph.node
            if node.op == "Const" and node.attr["dtype"].type == tf.int64.as_datatype_enum
        }
        return [
            int(constants[node.input[1]]) for node in graph.node if node.op == "PrefetchDataset"
        ]

    assert prefetch_sizes() == [tf.data.AUTOTUNE]
    assert prefetch_sizes(prefetch=3) == [3]
    assert prefetch_sizes(prefetch=0) == []


def test_cached_data_trains_exactly_like_uncached_data() -> None:
    """Three shuffled epochs: the cache must not freeze the first epoch's order."""
    traces = []
    for cache in (False, True):
        data = synthetic_project(2, batch=64)
        data["data"]["cache"] = cache
        data["training"] = {"epochs": 3, "seed": 0}
        run = run_engine(load_project_data(data), None)
        assert run["terminal"].status == "finished", run["terminal"]
        traces.append(run["losses"])
    assert len(traces[0]) == 24
    np.testing.assert_array_equal(traces[1], traces[0])


def test_evaluation_data_is_cached_when_its_source_asks() -> None:
    data = synthetic_project(1, steps=10)
    source = {**data["data"], "cache": True, "seed": 9}
    data["evaluation"] = {"every": 5, "source": source}
    dataset, examples = build_eval_data(load_project_data(data))
    assert examples == 512
    assert "CacheDatasetV2" in _pipeline_ops(dataset)


def test_a_run_ending_inside_its_first_cached_pass_caches_nothing_and_says_so() -> None:
    """No example is read twice: the run leaves the cache out (TensorFlow warned that it
    dropped the partial cache, in words that meant nothing to a user) and says why once."""
    data = synthetic_project(1, steps=3)
    data["data"].update(cache=True, shuffle_buffer=0)  # caches the batches, 3 of 16 read
    run = run_engine(load_project_data(data), None)
    assert run["terminal"].status == "finished", run["terminal"]
    assert not [m for m in run["logs"] if "dataset being cached" in m.text]
    (line,) = [m for m in run["logs"] if "data.cache is on" in m.text]
    assert line.level == "warning" and "nothing is cached" in line.text
