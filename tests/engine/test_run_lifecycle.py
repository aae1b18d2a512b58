"""The one place a run's handles learn from its messages whether it started, stepped, ended."""

from __future__ import annotations

from distloop.engine.messages import (
    Log,
    RunFailed,
    RunFinished,
    RunStarted,
    StepMetrics,
)
from distloop.engine.run_lifecycle import RunLifecycle

STARTED = RunStarted(
    strategy="MirroredStrategy", num_replicas=1, devices=["CPU:0"], tensorflow_version="2.21"
)


def test_a_run_starts_steps_and_ends() -> None:
    run = RunLifecycle("worker:0")
    assert (run.started, run.stepped, run.ended, run.failed) == (None, False, False, False)
    assert (run.last_step, run.last_loss, run.last_elapsed_s) == (None, None, 0.0)

    run.note(STARTED)
    run.note(Log(text="a line says nothing of the run's state"))
    assert run.started is STARTED and not run.serving and not run.stepped

    run.note(StepMetrics(steps=[1, 2], losses=[0.9, 0.8], elapsed_s=[0.5, 1.0]))
    run.note(StepMetrics(steps=[], losses=[], elapsed_s=[]))  # an empty batch moves nothing
    run.note(StepMetrics(steps=[3], losses=[0.7], elapsed_s=[1.5]))
    assert run.stepped and (run.last_step, run.last_loss, run.last_elapsed_s) == (3, 0.7, 1.5)
    assert not run.ended

    end = RunFinished(status="finished", last_step=3, final_loss=0.7, elapsed_s=1.5)
    run.note(end)
    assert run.ended and run.terminal is end and not run.failed


def test_a_failure_ends_the_run_as_failed() -> None:
    run = RunLifecycle()
    failure = RunFailed(error_type="ValueError", message="bad data", last_step=None)
    run.note(failure)
    assert run.ended and run.failed and run.terminal is failure and not run.stepped


def test_a_serving_task_is_started_and_never_steps() -> None:
    run = RunLifecycle("ps:0")
    run.note(STARTED.model_copy(update={"serving": "grpc://localhost:2222"}))
    assert run.started is not None and run.serving and not run.stepped
    assert run.stopped(killed=True) == RunFinished(
        status="stopped", last_step=0, final_loss=None, elapsed_s=0.0, killed=True, task="ps:0"
    )


def test_a_run_killed_on_request_stopped_at_its_last_step() -> None:
    run = RunLifecycle("worker:1")
    run.note(STARTED)
    run.note(StepMetrics(steps=[7, 8], losses=[0.5, 0.25], elapsed_s=[3.0, 4.0]))
    assert run.stopped(killed=True) == RunFinished(
        status="stopped", last_step=8, final_loss=0.25, elapsed_s=4.0, killed=True, task="worker:1"
    )
    # a cluster's reporter that ended without its own last message: stopped, not killed here
    assert run.stopped(killed=False).killed is False


def test_a_run_killed_before_its_first_step_stops_where_its_folder_says() -> None:
    """A resumed run killed before reporting a step: the step its status.json recorded."""
    run = RunLifecycle()
    assert run.stopped(killed=True, last_step=40).last_step == 40
    assert run.stopped(killed=True, last_step=None).last_step == 0
