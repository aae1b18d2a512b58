"""The loss plot's history features: compared runs, truncation for resumes, the legend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from distloop.engine.examples import load_example
from distloop.engine.messages import RunStarted
from distloop.gui.run.loss_plot import LossPlot
from distloop.gui.run.run_controller import RunController
from distloop.gui.run.series import GrowingArray, Smoother
from support.gui_fakes import FakeEngine, seed_run


@pytest.fixture
def plot(qtbot) -> LossPlot:
    plot = LossPlot()
    plot.resize(900, 500)
    qtbot.addWidget(plot)
    return plot


def test_growing_array_truncates_and_grows_again() -> None:
    values = GrowingArray(capacity=2)
    values.extend([1, 2, 3, 4])
    values.truncate(2)
    values.extend([5])
    assert list(values.view()) == [1, 2, 5]
    values.truncate(10)
    assert len(values) == 3


def test_legend_lists_only_curves_with_data(plot: LossPlot) -> None:
    assert plot.legend_names() == []
    plot.append([1, 2], [1.0, 0.5], named_losses={"generator": [2.0, 1.0]})
    assert plot.legend_names() == ["loss", "smoothed", "generator"]
    plot.add_evaluation(2, 0.75)
    assert plot.legend_names() == ["loss", "smoothed", "generator", "val_loss"]
    plot.clear()
    assert plot.legend_names() == []


def test_comparisons_keep_exact_values_colours_and_names(plot: LossPlot) -> None:
    first = np.array([0.9, 0.7, 0.3], dtype=np.float32).astype(np.float64)
    plot.add_comparison("/runs/a", "baseline", [1, 2, 3], first)
    plot.add_comparison("/runs/b", "lr 0.1", [1, 2], [2.0, 1.0])
    assert plot.legend_names() == ["baseline", "lr 0.1"]
    compared = plot.comparisons()
    assert np.array_equal(compared["baseline"][1], first)
    assert np.array_equal(compared["lr 0.1"][0], [1, 2])
    pens = [sample.item.opts["pen"].color().getRgb()[:3] for sample, _ in plot.legend.items]
    assert len(set(pens)) == 2  # each run its own colour
    assert not plot.hint.isVisible()

    plot.add_comparison("/runs/a", "baseline", [1], [5.0])  # the same run again: replaced
    assert len(plot.comparisons()) == 2 and list(plot.comparisons()["baseline"][1]) == [5.0]
    plot.append([1, 2], [1.0, 0.5])
    plot.clear()  # a new run keeps the comparison
    assert plot.legend_names() == ["lr 0.1", "baseline"]
    plot.clear_comparisons()
    assert plot.comparisons() == {} and plot.legend_names() == []
    assert plot.hint.isVisible()


def test_comparison_follows_the_smoothing_but_keeps_its_data(plot: LossPlot) -> None:
    losses = [1.0, 0.0, 1.0, 0.0]
    plot.add_comparison("k", "run", [1, 2, 3, 4], losses)
    (solid_sample, _label) = plot.legend.items[0]
    solid = solid_sample.item
    smoothed = solid.getOriginalDataset()[1]
    assert not np.array_equal(smoothed, losses)  # smoothing is on by default
    plot.smooth_checkbox.setChecked(False)
    assert np.array_equal(solid.getOriginalDataset()[1], losses)
    plot.smooth_checkbox.setChecked(True)
    plot.set_smoothing_weight(0.0)
    assert np.allclose(solid.getOriginalDataset()[1], losses)
    assert list(plot.comparisons()["run"][1]) == losses


def test_truncate_after_drops_redone_steps_everywhere(plot: LossPlot) -> None:
    plot.append(
        [1, 2, 3, 4],
        [4.0, 3.0, 2.0, 1.0],
        replica_losses=[[2.0, 2.0], [1.5, 1.5], [1.0, 1.0], [0.5, 0.5]],
        named_losses={"g": [1.0, 2.0, 3.0, 4.0]},
    )
    plot.add_evaluation(2, 0.5)
    plot.add_evaluation(4, 0.25)
    plot.truncate_after(2)
    assert list(plot.steps()) == [1, 2] and list(plot.losses()) == [4.0, 3.0]
    # Each replica's own mean: its share of the loss times the 2 replicas.
    assert [list(values) for values in plot.replica_losses()] == [[4.0, 3.0], [4.0, 3.0]]
    assert list(plot.named_losses()["g"]) == [1.0, 2.0]
    assert list(plot.evaluations()[0]) == [2.0]
    expected = Smoother(plot.smoothing_weight()).extend([4.0, 3.0])
    assert np.array_equal(plot.smoothed(), expected)  # the average starts over
    plot.append([3], [9.0])
    assert list(plot.steps()) == [1, 2, 3]
    plot.truncate_after(0)
    assert len(plot.steps()) == 0


def test_controller_resumes_through_its_engine_factory(qtbot, qloop, tmp_path: Path) -> None:
    made: list[tuple[str, Path, bool]] = []
    engine = FakeEngine(
        [
            [RunStarted(strategy="S", num_replicas=1, devices=[], tensorflow_version="x")],
            *seed_run(3, 3)[2:],
        ]
    )

    def engines(project, run_dir, *, resume=False):
        made.append(("resumed" if resume else "fresh", run_dir, resume))
        return engine

    controller = RunController(engines)
    controller.start(load_example("seed"), tmp_path, resume=True)
    qtbot.waitUntil(lambda: not controller.active, timeout=10_000)
    assert made == [("resumed", tmp_path, True)]
