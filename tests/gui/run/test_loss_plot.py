"""The loss plot keeps exact values, smooths incrementally and stays fast at a million points."""

from __future__ import annotations

import time

import numpy as np
import pytest
from distloop.engine.messages import Message, RunFinished, RunStarted, StepMetrics
from distloop.engine.run_model import RunModel
from distloop.gui.run.loss_plot import (
    LEGEND_NAME_CHARS,
    REDRAW_INTERVAL_MS,
    LossPlot,
    log_tick_text,
)
from distloop.gui.run.series import Smoother
from PySide6.QtWidgets import QVBoxLayout, QWidget
from support.gui_fakes import FakeEngine, factory


@pytest.fixture
def plot(qtbot) -> LossPlot:
    plot = LossPlot()
    plot.resize(900, 500)
    plot.show()
    qtbot.addWidget(plot)
    return plot


def test_million_points_keep_exact_values_and_redraw_fast(plot: LossPlot) -> None:
    rng = np.random.default_rng(0)
    losses = rng.random(1_000_000).astype(np.float32).astype(np.float64)
    steps = np.arange(1, len(losses) + 1)
    started = time.perf_counter()
    for begin in range(0, len(losses), 10_000):
        plot.append(steps[begin : begin + 10_000], losses[begin : begin + 10_000])
    appended = time.perf_counter() - started
    started = time.perf_counter()
    plot.redraw()
    plot.plot_widget.grab()  # forces the paint, with downsampling and clipping
    redrawn = time.perf_counter() - started
    assert np.array_equal(plot.steps(), steps)
    assert np.array_equal(plot.losses(), losses)
    assert np.array_equal(plot.losses().astype(np.float32), losses.astype(np.float32))
    x, y = plot.raw_curve.getOriginalDataset()
    assert np.array_equal(x, steps) and np.array_equal(y, losses)  # the curve holds it all
    shown, _ = plot.raw_curve.getData()
    assert len(shown) < 20_000  # and draws a peak-downsampled few thousand points
    assert appended < 10 and redrawn < 10, (appended, redrawn)
    print(f"append 1M in 100 batches: {appended:.3f} s, redraw+paint: {redrawn:.3f} s")


def test_downsampling_keeps_a_one_step_spike_and_thins_the_smoothed_curve(plot: LossPlot) -> None:
    """Raw losses keep each pixel column's extremes; the smoothed curve one mean per column."""
    losses = np.ones(1_000_000)
    losses[654_321] = 50.0
    plot.append(np.arange(1, len(losses) + 1), losses)
    plot.redraw()
    plot.plot_widget.grab()
    raw_x, raw_y = plot.raw_curve.getData()
    assert raw_y.max() == 50.0  # one step in a million, still drawn
    smooth_x, smooth_y = plot.smooth_curve.getData()
    columns = plot.plot_item.vb.width()
    assert columns / 2 < len(smooth_x) <= columns + 2
    assert 2 * len(smooth_x) - 4 <= len(raw_x) <= 2 * len(smooth_x) + 4  # min and max
    assert smooth_y.max() < plot.smoothed().max()  # means, not peaks
    plot.smooth_checkbox.setChecked(False)
    plot.add_comparison("past", "past", np.arange(1, 1001), np.linspace(1, 0, 1000))
    (comparison,) = plot._comparisons.values()
    assert comparison.curve.opts["downsampleMethod"] == "peak"  # raw losses when not smoothed
    plot.smooth_checkbox.setChecked(True)
    assert comparison.curve.opts["downsampleMethod"] == "mean"


def test_appending_never_changes_earlier_smoothed_values(plot: LossPlot) -> None:
    rng = np.random.default_rng(1)
    plot.append(np.arange(1, 501), rng.random(500))
    before = plot.smoothed().copy()
    plot.append(np.arange(501, 1001), rng.random(500) * 10)
    assert np.array_equal(plot.smoothed()[:500], before)
    assert len(plot.smoothed()) == 1000


def test_slider_recomputes_and_off_hides(qtbot, plot: LossPlot) -> None:
    plot.append([1, 2, 3], [1.0, 0.0, 1.0])
    plot.set_smoothing_weight(0.0)
    assert np.array_equal(plot.smoothed(), [1.0, 0.0, 1.0])
    plot.set_smoothing_weight(0.5)
    assert plot.smoothed()[1] == pytest.approx(1 / 3)
    plot.smooth_checkbox.setChecked(False)
    assert not plot.smooth_curve.isVisible() and not plot.smooth_slider.isEnabled()


def test_redraws_at_a_bounded_rate_only_when_data_arrived(qtbot, plot: LossPlot) -> None:
    plot.redraw_count = 0
    qtbot.wait(200)
    assert plot.redraw_count == 0  # nothing new, nothing drawn
    started = time.perf_counter()
    for step in range(1, 201):
        plot.append([step], [1.0 / step])
        qtbot.wait(1)
    elapsed = time.perf_counter() - started
    assert 1 <= plot.redraw_count <= elapsed / (REDRAW_INTERVAL_MS / 1000) + 2
    assert plot.redraw_count < 200  # never one redraw per append
    qtbot.waitUntil(lambda: len(plot.raw_curve.getData()[0]) == 200, timeout=1000)


def test_replica_curves_and_readout(plot: LossPlot) -> None:
    plot.append([1, 2], [0.5, 0.25], [[0.2, 0.3], [0.1, 0.15]])  # shares of the loss
    assert plot.replica_checkbox.isEnabled()
    assert len(plot.replica_curves) == 2
    assert np.allclose(plot.replica_losses()[1], [0.6, 0.3])  # share x 2 replicas
    plot.redraw()
    plot.show_readout(1.9)
    assert plot.readout.text().startswith("step 2   loss 0.25")
    assert "replica 1: 0.3" in plot.readout.text()
    plot.log_checkbox.setChecked(True)
    assert plot.plot_item.ctrl.logYCheck.isChecked()
    plot.show_readout(1.0)
    assert plot.h_line.value() == pytest.approx(np.log10(0.5))


def test_clear_starts_over(plot: LossPlot) -> None:
    plot.append([1, 2], [0.5, 0.25], [[0.2, 0.3], [0.1, 0.15]])
    plot.clear()
    assert len(plot.steps()) == 0 and plot.replica_curves == []
    assert not plot.replica_checkbox.isEnabled()
    assert plot.hint.isVisible()
    with pytest.raises(ValueError):
        plot.append([1, 2], [0.5])


def test_named_losses_get_curves_of_their_own(plot: LossPlot) -> None:
    plot.append(
        [1, 2], [3.0, 2.5], named_losses={"generator": [1.0, 0.5], "discriminator": [2.0, 2.0]}
    )
    plot.append([3], [2.0], named_losses={"generator": [0.25], "discriminator": [1.75]})
    named = plot.named_losses()
    assert list(named) == ["generator", "discriminator"]
    assert np.array_equal(named["generator"], [1.0, 0.5, 0.25])
    plot.redraw()
    names = [item.name() for item in plot.plot_item.listDataItems()]
    assert {"loss", "smoothed", "generator", "discriminator"} <= set(names)
    plot.show_readout(3)
    assert "generator: 0.25" in plot.readout.text()


def test_evaluations_are_markers_on_their_steps(plot: LossPlot) -> None:
    plot.append(np.arange(1, 101), np.linspace(1, 0.1, 100))
    plot.add_evaluation(50, 0.6)
    plot.add_evaluation(100, 0.2)
    steps, losses = plot.evaluations()
    assert np.array_equal(steps, [50, 100]) and np.array_equal(losses, [0.6, 0.2])
    plot.redraw()
    assert np.array_equal(plot.eval_curve.getData()[1], [0.6, 0.2])
    plot.clear()
    assert len(plot.evaluations()[0]) == 0
    assert plot.eval_curve not in plot.plot_item.listDataItems()


def test_the_next_runs_evaluations_show_after_a_clear(plot: LossPlot) -> None:
    """Re-adding the marker curve with the last run's points raised inside pyqtgraph (its
    view was not yet a ViewBox) and left a stray dashed line: two examples run one after
    the other, both evaluating, showed it."""
    plot.append(np.arange(1, 201), np.linspace(2.5, 0.1, 200))
    plot.add_evaluation(100, 0.06)
    plot.add_evaluation(200, 0.05)
    plot.redraw()
    plot.clear()
    plot.append(np.arange(1, 51), np.linspace(1.4, 0.7, 50))
    plot.add_evaluation(50, 0.7)
    plot.redraw()
    assert plot.eval_curve in plot.plot_item.listDataItems()
    steps, losses = plot.eval_curve.getData()
    assert np.array_equal(steps, [50]) and np.array_equal(losses, [0.7])


LONG_RUN_NAME = "classification-" + "with-a-long-descriptive-name-" * 8 + "2026-12-03T05-30-00"


def _inside_view(plot: LossPlot) -> bool:
    """Whether the plot area and its legend lie within the widget that shows them."""
    view = plot.plot_widget.viewport().rect()
    return all(
        item.sceneBoundingRect().right() <= view.right() + 1
        for item in (plot.plot_item, plot.legend)
    )


def test_a_long_caption_is_elided_and_never_widens_the_plot(qtbot) -> None:
    """A run's name as the title once pushed the plot to 1587 px in a 676 px dock, for good."""
    parent = QWidget()
    parent.resize(420, 300)
    plot = LossPlot()
    QVBoxLayout(parent).addWidget(plot)
    qtbot.addWidget(parent)
    parent.show()
    qtbot.waitExposed(parent)
    narrow = parent.width()
    plot.append([1, 2, 3], [3.0, 2.0, 1.0])
    narrowest = plot.minimumSizeHint().width()
    plot.set_caption(LONG_RUN_NAME)
    qtbot.wait(50)  # the plot's scene lays itself out on posted events
    assert plot.width() <= parent.width()
    assert _inside_view(plot)
    assert plot.minimumSizeHint().width() == narrowest
    assert plot.caption() == LONG_RUN_NAME
    assert plot.caption_label.toolTip() == LONG_RUN_NAME
    shown = plot.caption_label.text()
    assert "…" in shown and len(shown) < len(LONG_RUN_NAME)
    assert shown.startswith("classification-") and shown.endswith("T05-30-00")
    plot.set_caption("")
    qtbot.wait(50)
    assert _inside_view(plot)
    assert not plot.caption_label.isVisible()
    parent.resize(1400, 300)
    plot.set_caption("short & <b>plain</b>")
    qtbot.wait(50)
    assert plot.caption_label.text() == "short & <b>plain</b>"  # shown whole, as typed
    plot.set_caption(LONG_RUN_NAME)
    qtbot.wait(50)
    wide = plot.caption_label.text()
    parent.resize(narrow, 300)  # the window narrows again: the caption follows
    qtbot.wait(50)
    assert parent.width() == narrow and plot.width() <= narrow and _inside_view(plot)
    assert len(plot.caption_label.text()) < len(wide)


def test_replica_curves_are_each_replicas_mean_loss_smoothed(plot: LossPlot) -> None:
    """Two local replicas of a four-replica cluster: each share times 4, smoothed like the loss."""
    rng = np.random.default_rng(1)
    plot.set_num_replicas(4)
    shares = rng.random((60, 2)) / 4
    for begin in range(0, 60, 20):  # the engine's StepMetrics batches
        batch = shares[begin : begin + 20]
        plot.append(np.arange(begin + 1, begin + 21), batch.sum(axis=1) * 2, batch.tolist())
    own = [shares[:, 0] * 4, shares[:, 1] * 4]
    assert np.allclose(plot.replica_losses(), own)
    expected = [Smoother(plot.smoothing_weight()).extend(values) for values in own]
    assert np.allclose(plot.replica_smoothed(), expected)
    plot.redraw()
    assert np.allclose(plot.replica_curves[0].getData()[1], expected[0])
    assert plot.legend_names() == [
        "loss",
        "smoothed",
        "replica 0 (own mean loss)",
        "replica 1 (own mean loss)",
    ]
    plot.set_smoothing_weight(0.9)
    assert np.allclose(plot.replica_smoothed()[1], Smoother(0.9).extend(own[1]))
    plot.smooth_checkbox.setChecked(False)  # no smoothing: the raw own losses, no "smoothed"
    plot.redraw()
    assert np.allclose(plot.replica_curves[1].getData()[1], own[1])
    assert plot.legend_names() == ["loss", "replica 0 (own mean loss)", "replica 1 (own mean loss)"]
    plot.raw_curve.setVisible(False)  # as a click on its legend entry does: the entry stays
    plot.replica_checkbox.setChecked(False)  # curves switched off leave the legend
    assert plot.legend_names() == ["loss"]


def test_legend_lies_beside_the_data_not_on_it(plot: LossPlot, qtbot) -> None:
    plot.append([1, 2, 3], [3.0, 2.0, 1.0], [[1.5, 1.5], [1.0, 1.0], [0.5, 0.5]])
    plot.add_comparison("/runs/a", "a-compared-run-with-" + "a-very-long-name-" * 4, [1], [2.0])
    qtbot.wait(50)  # the scene lays itself out on posted events
    view = plot.plot_item.vb.sceneBoundingRect()
    legend = plot.legend.sceneBoundingRect()
    assert legend.left() >= view.right()
    assert legend.right() <= plot.plot_widget.viewport().rect().right() + 1
    assert max(len(name) for name in plot.legend_names()) <= LEGEND_NAME_CHARS
    assert view.width() > plot.plot_widget.width() / 2


def test_log_axis_labels_decades_and_plain_numbers(plot: LossPlot) -> None:
    axis = plot.plot_item.getAxis("left")
    plot.log_checkbox.setChecked(True)
    levels = axis.tickValues(-4.2, 1.3, 400)  # 0.00006 .. 20: five decades
    labels = [axis.tickStrings(values, 1.0, spacing) for spacing, values in levels]
    shown = [text for level in labels for text in level if text]
    assert sorted(shown, key=float) == ["0.0001", "0.001", "0.01", "0.1", "1", "10"]
    levels = axis.tickValues(np.log10(0.05), np.log10(2), 400)  # 1.6 decades: minor ticks only
    labels = [axis.tickStrings(values, 1.0, spacing) for spacing, values in levels]
    shown = sorted((text for level in labels for text in level if text), key=float)
    assert shown == ["0.1", "0.2", "0.5", "1"]
    levels = axis.tickValues(np.log10(0.25), np.log10(0.95), 400)  # within a decade
    shown = [text for spacing, values in levels for text in axis.tickStrings(values, 1, spacing)]
    assert sorted(shown, key=float) == ["0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"]
    assert log_tick_text(1e-6) == "10⁻⁶" and log_tick_text(2e-6) == "2·10⁻⁶"


def test_the_window_scales_replica_shares_by_the_runs_replicas(qtbot, make_window) -> None:
    """A cluster's chief reports its 2 local replicas' shares; the run has 4 replicas in all."""
    started = RunStarted(
        strategy="MultiWorkerMirroredStrategy",
        strategy_kind="multi_worker_mirrored",
        num_replicas=4,
        devices=["/job:worker/task:0/device:CPU:0"],
        tensorflow_version="2.99.0-fake",
        total_steps=2,
    )
    shares = [[0.1, 0.15], [0.05, 0.1]]
    batches: list[list[Message]] = [
        [started],
        [StepMetrics(steps=[1, 2], losses=[0.5, 0.3], elapsed_s=[0.1, 0.2], replica_losses=shares)],
        [RunFinished(status="finished", last_step=2, final_loss=0.3, elapsed_s=0.2)],
    ]
    window = make_window(engine_factory=factory(FakeEngine(batches), []))
    window.run_action.trigger()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    assert np.allclose(window.plot.replica_losses(), [[0.4, 0.2], [0.6, 0.4]])
    assert window.status_panel.values["strategy"].text() == "multi_worker_mirrored"


def _painted(plot: LossPlot) -> int:
    """Pixels of the loss's blue inside the data's view (not the legend's sample line)."""
    view = plot.plot_widget.mapFromScene(plot.plot_item.vb.sceneBoundingRect()).boundingRect()
    image = plot.plot_widget.grab(view).toImage()
    count = 0
    for y in range(0, image.height(), 2):
        for x in range(0, image.width(), 2):
            color = image.pixelColor(x, y)
            count += color.blue() > 150 and color.red() < 90 and color.green() < 150
    return count


def test_a_single_step_is_drawn(plot: LossPlot, qtbot) -> None:
    """A line needs two points: a run of one step showed nothing at all."""
    plot.append([1], [0.5])
    plot.redraw()
    qtbot.wait(50)  # the scene lays itself out (the legend beside the data) on posted events
    assert _painted(plot) > 0
    plot.append([2], [0.4])
    plot.redraw()
    assert plot.raw_curve.opts["symbol"] is None  # a line from two points on


def test_axes_name_their_metric_without_a_scale_factor(qtbot, plot: LossPlot) -> None:
    """``val_accuracy (x0.001)`` was pyqtgraph's SI prefix for values below 1."""
    plot.add_comparison("a", "run a", np.arange(1.0, 6.0), np.linspace(0.95, 0.99, 5))
    plot.set_comparison_axes("step", "val_accuracy")
    plot.plot_item.enableAutoRange()
    qtbot.wait(20)
    left = plot.plot_item.getAxis("left")
    assert "x0.001" not in left.labelString() and "val_accuracy" in left.labelString()


def test_clearing_leaves_no_crosshair_on_the_empty_plot(plot: LossPlot) -> None:
    plot.append([1, 2, 3], [0.5, 0.4, 0.3])
    plot.redraw()
    plot.show_readout(2)
    assert plot.v_line.isVisible()
    plot.clear()
    assert not plot.v_line.isVisible() and not plot.h_line.isVisible()


def test_a_clusters_replica_curves_say_whose_they_are(plot: LossPlot) -> None:
    """A 2-worker cluster reports its chief's replica alone: 'replica 0' beside 'Replicas: 2'
    read as if the other had gone missing."""
    model = RunModel(total_steps=10)
    plot.follow(model)
    model.subscribe(lambda message: plot.show_change(model, message))
    model.apply(
        RunStarted(
            strategy="MultiWorkerMirroredStrategy",
            num_replicas=2,
            devices=["/job:worker/replica:0/task:0/device:CPU:0"] * 2,
            tensorflow_version="2",
            task="worker:0",
        )
    )
    model.apply(StepMetrics(steps=[1], losses=[1.0], elapsed_s=[0.1], replica_losses=[[0.25]]))
    plot.redraw()
    assert "worker:0 replica 0 (own mean loss)" in plot.legend_names()
    assert plot.replica_losses()[0].tolist() == [0.5]  # its share times the run's 2 replicas


def _tick_labels(plot: LossPlot) -> list[str]:
    """The y axis's labels as it draws them now, every level's."""
    axis = plot.plot_item.getAxis("left")
    low, high = axis.range
    levels = axis.tickValues(low, high, axis.height())
    return [text for spacing, values in levels for text in axis.tickStrings(values, 1, spacing)]


@pytest.mark.parametrize(("log", "rounding"), [(False, 1e-15), (False, 1.2e-7), (True, 1e-15)])
def test_one_loss_value_gets_ticks_a_person_can_read(
    plot: LossPlot, qtbot, log: bool, rounding: float
) -> None:
    """One step whose replicas' losses are the loss's but for rounding (a float64's, a
    float32's) gave the axis a span of rounding error: ``1.314145565032962``, labels over
    labels."""
    plot.log_checkbox.setChecked(log)
    loss = 1.314145565032962
    plot.set_num_replicas(2)
    plot.append([1], [loss], [[loss / 2, (loss + rounding) / 2]])
    plot.redraw()
    value = np.log10(loss) if log else loss
    axis = plot.plot_item.getAxis("left")
    qtbot.waitUntil(lambda: axis.range[0] < value < axis.range[1], timeout=5_000)
    labels = _tick_labels(plot)
    assert max(len(text) for text in labels) <= 5, labels
    shown = [text for text in labels if text]
    assert len(shown) == len(set(shown)), labels


@pytest.mark.parametrize("step", [3, 50, 198])
def test_the_prune_label_stays_inside_the_plot(plot: LossPlot, qtbot, step: int) -> None:
    """ "pruned at step 50 by the median pruner" was cut at the plot's left edge."""
    plot.resize(560, 300)
    plot.append(np.arange(1, 201), np.linspace(2.0, 0.5, 200))
    plot.mark_pruned(step, f"pruned at step {step} by the median pruner: loss 2 was worse")
    plot.redraw()
    view = plot.plot_item.vb
    label = plot.pruned_mark.label
    qtbot.waitUntil(lambda: view.viewRange()[0][1] >= 200, timeout=5_000)
    qtbot.wait(50)  # the label follows the view on posted events
    shown = label.mapRectToScene(label.boundingRect())
    inside = view.sceneBoundingRect()
    assert inside.left() <= shown.left() and shown.right() <= inside.right(), (shown, inside)


def test_the_smoothed_loss_is_drawn_over_the_lighter_curves(plot: LossPlot) -> None:
    """The raw loss, the replicas and a compared run buried the smoothed loss."""
    plot.append(
        [1, 2, 3], [3.0, 2.0, 1.0], [[1.0, 2.0], [0.5, 1.5], [0.25, 0.75]], {"gen": [1, 2, 3]}
    )
    plot.add_comparison("/runs/a", "a", [1, 2, 3], [2.0, 1.0, 0.5])
    (comparison,) = plot._comparisons.values()
    others = [plot.raw_curve, *plot.replica_curves, comparison.curve, comparison.raw_curve]
    others += [series.curve for series in plot._named.values()]
    assert all(plot.smooth_curve.zValue() > curve.zValue() for curve in others)
    smooth_pen = plot.smooth_curve.opts["pen"]
    for curve in (plot.raw_curve, *plot.replica_curves):
        pen = curve.opts["pen"]
        assert pen.color().alpha() < 255 and pen.widthF() < smooth_pen.widthF()


def test_the_legend_says_when_replica_curves_coincide(plot: LossPlot) -> None:
    """Two replicas of the seed's data have one loss: one curve hid the other, unexplained."""
    plot.set_num_replicas(2)
    plot.append([1, 2], [1.0, 0.5], [[0.5, 0.5], [0.25, 0.25 * (1 + 1e-8)]])
    assert plot.legend_names()[-2:] == ["replica 0 (own mean loss)", "replica 1 (= replica 0)"]
    plot.append([3], [0.4], [[0.1, 0.3]])  # they part
    assert plot.legend_names()[-2:] == ["replica 0 (own mean loss)", "replica 1 (own mean loss)"]
    plot.append([4], [0.4], [[0.2, 0.2]])  # once apart, two curves
    assert plot.legend_names()[-1] == "replica 1 (own mean loss)"


def test_a_narrow_plot_keeps_its_width_and_lays_the_legend_over_the_data(
    plot: LossPlot, qtbot
) -> None:
    """At 1024x700 the plot is ~550 px wide: a legend of six entries beside the data left
    the data 225 px. There it lies over the data's top right; wide again, beside it."""
    plot.set_num_replicas(2)
    plot.append([1, 2, 3], [3.0, 2.0, 1.0], [[1.0, 2.0], [0.5, 1.5], [0.25, 0.75]])
    plot.add_evaluation(3, 1.5)
    plot.add_comparison("/runs/a", "Seed: the guide's custom loop #2", [1, 2, 3], [2, 1, 0.5])
    assert len(plot.legend_names()) == 6
    plot.resize(550, 300)
    qtbot.waitUntil(lambda: plot.legend_over_data(), timeout=5_000)
    view = plot.plot_item.vb
    qtbot.waitUntil(lambda: view.width() >= 0.8 * plot.plot_widget.width(), timeout=5_000)
    legend = plot.legend.sceneBoundingRect()
    assert view.sceneBoundingRect().contains(legend)
    plot.resize(1300, 500)
    qtbot.waitUntil(lambda: not plot.legend_over_data(), timeout=5_000)
    qtbot.wait(50)  # the scene lays itself out on posted events
    assert plot.legend.sceneBoundingRect().left() >= view.sceneBoundingRect().right()
