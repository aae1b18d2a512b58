"""Studies: search spaces checked against the project, the objective read from live
messages, and a real Optuna study that prunes, persists, survives SIGKILL and resumes."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distloop.engine.config import Project
from distloop.engine.examples import load_example
from distloop.engine.messages import StepMetrics
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project_data
from distloop.engine.run_events import Evaluated, RunOutcome, StatusChanged, StepsAdded
from distloop.engine.run_folder import read_metrics, read_status
from distloop.engine.run_history import summarize
from distloop.engine.study.folders import list_studies
from distloop.engine.study.objective import ObjectiveTracker, objective_problems
from distloop.engine.study.runner import Study, StudyPlan, StudySettings, write_plan
from distloop.engine.study.space import (
    Choices,
    FloatRange,
    IntRange,
    parse_space,
    space_from_data,
    with_values,
)
from support.distloop_testing import GUIDE_STEP, REPO, distloop, synthetic_project
from support.study_folders import ENDLESS_TRIALS, crafted_study_folder


@pytest.fixture
def seed() -> Project:
    return load_example("seed")


def _mlp() -> Project:
    return load_project_data(synthetic_project(1, steps=40))


def test_a_space_names_any_field_by_its_path() -> None:
    space = parse_space(
        json.dumps(
            {
                "optimizer.learning_rate": {"low": 1e-4, "high": 1, "log": True},
                "optimizer.kind": {"choices": ["adam", "sgd"]},
                "model.layers.0.units": {"low": 4, "high": 64},
                "model.layers.0.kernel_regularizer.l2": {"low": 0, "high": 0.01},
                "data.global_batch_size": {"values": [16, 32]},
                "training.steps": {"values": [20, 40]},
            }
        ),
        _mlp(),
    )
    assert space.axes == {
        "optimizer.learning_rate": FloatRange(1e-4, 1.0, True),
        "optimizer.kind": Choices(("adam", "sgd")),
        "model.layers.0.units": IntRange(4, 64),
        "model.layers.0.kernel_regularizer.l2": FloatRange(0.0, 0.01),
        "data.global_batch_size": Choices((16, 32), grid=True),
        "training.steps": Choices((20, 40), grid=True),
    }
    assert not space.is_grid()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "space: line 1, column 2: not valid JSON"),
        ("[]", "expected a JSON object of field paths"),
        ('{"optimizer.lr": {"low": 1, "high": 2}}', "optimizer.lr: optimizer has no field 'lr'"),
        ('{"model.layers.7.units": {"low": 1, "high": 2}}', "model.layers has no field '7'"),
        ('{"optimizer": {"low": 1, "high": 2}}', "names a section, not a value"),
        ('{"optimizer.learning_rate": {"low": 1, "high": 1}}', "is empty: low must be below"),
        ('{"optimizer.learning_rate": {"low": 0, "high": 1, "log": true}}', "must start above 0"),
        ('{"optimizer.kind": {"choices": ["adam"]}}', "choices has one value"),
        ('{"optimizer.kind": {"choices": ["adam", "adam"]}}', "lists a value twice"),
        ('{"optimizer.kind": {"low": 1, "high": 2}}', 'holds "sgd", not a number'),
        (
            '{"optimizer.kind": {"choices": ["adam", "nadam"]}}',
            "'nadam': optimizer: Input tag 'nadam'",
        ),
        (
            '{"optimizer.learning_rate": {"low": 0.1, "high": 1000}}',
            "learning_rate: 1000.0: Input should be less than or equal to 100",
        ),
        ('{"optimizer.learning_rate": {"from": 1}}', "unknown keys ['from']"),
        (
            '{"model.layers.0.units": {"values": [8, -1]}}',
            "units: -1: Input should be greater than or equal to 1",
        ),
    ],
)
def test_a_bad_space_is_one_problem_with_its_path(text: str, says: str) -> None:
    with pytest.raises(ProblemsError) as caught:
        parse_space(text, _mlp())
    assert says in str(caught.value)


def test_changing_a_kind_keeps_only_the_settings_the_new_kind_has(seed: Project) -> None:
    adam = with_values(seed, {"optimizer.kind": "adam", "optimizer.learning_rate": 0.02}, "x")
    assert (adam.optimizer.kind, adam.optimizer.learning_rate) == ("adam", 0.02)
    assert adam.name == "x" and adam.model == seed.model
    back = with_values(adam, {"optimizer.kind": "sgd"}, "y")
    assert back.optimizer.kind == "sgd" and back.optimizer.learning_rate == 0.02


def test_the_objective_is_the_smoothed_loss_reported_at_rungs() -> None:
    """The mean loss of the last tenth of the steps so far, as the runs list and the sweep
    results show it (it was TensorBoard's moving average, a number shown nowhere else)."""
    tracker = ObjectiveTracker("loss", report_every=10, warmup=15)
    losses = [1.0 / step for step in range(1, 41)]
    for first in range(0, 40, 7):  # batches of steps that do not end at the rungs
        steps = tuple(range(first + 1, min(first + 8, 41)))
        tracker.apply(StepsAdded(steps, tuple(losses[first : steps[-1]]), (0.0,) * len(steps)))

    def late_mean(step: int) -> float:
        late = losses[step - -(-step // 10) : step]
        return sum(late) / len(late)

    # The first rung after the warm-up (step 15), then every 10 steps: never one batch.
    assert tracker.take_reports() == [
        (15, pytest.approx(late_mean(15))),
        (25, pytest.approx(late_mean(25))),
        (35, pytest.approx(late_mean(35))),
    ]
    assert tracker.value() == pytest.approx((losses[-1] + losses[-2] + losses[-3] + losses[-4]) / 4)
    assert tracker.last_step == 40


def test_a_validation_objective_is_the_best_evaluation() -> None:
    tracker = ObjectiveTracker("val_accuracy", report_every=10)
    for step, accuracy in ((10, 0.5), (20, 0.9), (30, 0.8)):
        tracker.apply(Evaluated(step, {"val_accuracy": accuracy}, examples=5))
    assert tracker.value() == 0.9
    assert tracker.take_reports() == [(10, 0.5), (20, 0.9), (30, 0.8)]


def test_what_a_plan_cannot_run_is_named(seed: Project) -> None:
    ranges = parse_space('{"optimizer.learning_rate": {"low": 0.01, "high": 1}}', seed)
    choices = parse_space('{"optimizer.kind": {"choices": ["adam", "sgd"]}}', seed)
    assert "val_loss needs evaluation" in str(objective_problems(seed, "val_loss")[0])
    plan = StudyPlan(seed, ranges, StudySettings(sampler="grid", objective="loss"))
    assert "grid needs every field as values or choices" in str(plan.problems()[0])
    plan = StudyPlan(seed, choices, StudySettings(sampler="cmaes", objective="loss"))
    assert "cmaes searches number ranges only" in str(plan.problems()[0])
    plan = StudyPlan(
        seed, choices, StudySettings(sampler="grid", pruner="hyperband", objective="loss")
    )
    assert "hyperband draws its own brackets" in str(plan.problems()[0])


def test_bad_input_to_distloop_sweep_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    project = tmp_path / "project.json"
    project.write_text(json.dumps(synthetic_project(1, steps=10)))
    space = tmp_path / "space.json"
    out = tmp_path / "study"
    cases = [
        ("{not json", ["--space", str(space), "--out", str(out)], "not valid JSON"),
        (
            '{"optimizer.learning_rate": {"low": 0.001, "high": 0.1}, '
            '"optimizer.learning_rate": {"choices": [0.1, 0.2]}}',
            ["--space", str(space)],
            "'optimizer.learning_rate' is given twice in one object: keep one",
        ),
        (
            json.dumps(
                {
                    "model.layers.0.units": {"values": list(range(1, 1001))},
                    "training.seed": {"values": list(range(1000))},
                    "optimizer.learning_rate": {"values": [(i + 1) / 1e4 for i in range(1000)]},
                }
            ),
            ["--space", str(space), "--sampler", "grid"],
            "sampler: the grid has 1000000000 combinations; at most 100000",
        ),
        (
            json.dumps({"x" * 2**20: {"choices": [1, 2]}}),
            ["--space", str(space)],
            "'... (1048576 characters)",
        ),
        (
            json.dumps({"data.global_batch_size": {"choices": ["y" * 2**20, 2]}}),
            ["--space", str(space)],
            "'... (1048576 characters): Input should be a valid integer",
        ),
        ('{"optimizer.learning_rate": {"low": 2, "high": 1}}', ["--space", str(space)], "empty"),
        ('{"optimizer.kind": {"choices": ["sgd"]}}', ["--space", str(space)], "one value"),
        ('{"optimizer.learning_rate": {"low": 0.1, "high": 1}}', [], "--space SPACE.json is req"),
        (
            '{"optimizer.learning_rate": {"low": 0.1, "high": 1}}',
            ["--space", str(space), "--objective", "val_accuracy"],
            "val_accuracy needs evaluation",
        ),
        (
            '{"optimizer.learning_rate": {"values": [0.1, 1]}}',
            ["--space", str(space), "--sampler", "grid", "--pruner", "hyperband"],
            "pruner: hyperband draws its own brackets: use median, asha or none",
        ),
        (
            '{"optimizer.kind": {"choices": ["adam", "sgd"]}}',
            ["--space", str(space), "--sampler", "cmaes"],
            "sampler: cmaes searches number ranges only: no choices",
        ),
    ]
    for text, args, says in cases:
        space.write_text(text)
        done = distloop("sweep", str(project), *args, "--out", str(out), timeout_s=60)
        assert done.returncode == 1, done.stderr
        assert says in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) <= 2
        assert len(done.stderr) < 2000  # what the file holds, quoted shortened
        assert not out.exists()
    not_a_study = distloop("sweep", "--resume", str(tmp_path), timeout_s=60)
    assert not_a_study.returncode == 1
    assert "no study.json: not a study folder" in not_a_study.stderr


def _trials(folder: Path) -> list:
    import optuna

    return optuna.load_study(study_name="distloop", storage=f"sqlite:///{folder}/study.db").trials


@pytest.mark.slow
def test_a_study_prunes_persists_and_resumes_after_sigkill(tmp_path: Path) -> None:
    """TPE + the median pruner on a small model: the SQLite study agrees with the run
    folders, pruned trials stop early and say so, and a SIGKILLed study resumes to its
    planned number of trials with the interrupted trial's values queued again."""
    data = synthetic_project(1, steps=300)
    data["name"] = "study test"
    project = tmp_path / "project.json"
    project.write_text(json.dumps(data))
    space = tmp_path / "space.json"
    space.write_text('{"optimizer.learning_rate": {"low": 1e-4, "high": 0.5, "log": true}}')
    folder = tmp_path / "study"
    command = [
        sys.executable, "-m", "distloop.gui.launcher", "sweep", str(project),
        "--space", str(space), "--trials", "6", "--pruner", "median", "--seed", "3",
        "--out", str(folder),
    ]  # fmt: skip
    first = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not (folder / "trials" / "trial-0002" / "metrics.csv").exists():
            assert first.poll() is None, first.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the third trial never started"
            time.sleep(0.2)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    running = [t for t in _trials(folder) if t.state.name == "RUNNING"]
    assert [t.number for t in running] == [2]

    resumed = distloop("sweep", "--resume", str(folder), timeout_s=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "trial 2 was interrupted; its values run again" in resumed.stderr
    trials = _trials(folder)
    states = [t.state.name for t in trials]
    assert states[2] == "FAIL" and trials[2].user_attrs["interrupted"]
    counted = [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    assert len(counted) == 6 and states.count("FAIL") == 1
    assert trials[3].params == trials[2].params  # queued again, first after the resume

    for trial in counted:
        run_dir = Path(trial.user_attrs["run_dir"])
        status = read_status(run_dir)
        assert status["study_trial"] == trial.number
        steps = len(read_metrics(run_dir)["step"])
        if trial.state.name == "PRUNED":
            assert status["status"] == "pruned"
            assert status["pruned_reason"].startswith(f"pruned at step {status['pruned_at']}")
            assert steps < 300 and (run_dir / "model.keras").is_file()
        else:
            assert status["status"] == "finished" and steps == 300
    assert any(t.state.name == "PRUNED" for t in counted), states
    best = min((t for t in counted if t.state.name == "COMPLETE"), key=lambda t: t.value)
    assert f"best: trial {best.number} loss={best.value:.6g}" in resumed.stdout
    # The search learned: its best rate is far from the range's poor low end.
    assert best.params["optimizer.learning_rate"] > 0.01


def test_a_field_path_in_other_digits_is_no_list_index() -> None:
    """'²'.isdigit() is true and int('²') raised its own message, not the missing field."""
    from distloop.engine.study.space import field_value

    with pytest.raises(ValueError, match=r"model\.layers has no field '\u00b2'"):
        field_value({"model": {"layers": [{"units": 3}]}}, "model.layers.\u00b2")


def test_a_study_is_run_by_one_process_at_a_time(tmp_path: Path) -> None:
    """The window and a `distloop sweep --resume` of the same folder would each ask Optuna
    for the next trial: the second is refused in one line while the first holds it."""
    from distloop.engine.run_folder import RunFolderLock
    from distloop.engine.study.runner import Study, write_plan

    project = _mlp()
    folder = tmp_path / "study"
    space = parse_space('{"optimizer.learning_rate": {"low": 0.01, "high": 1}}', project)
    plan = StudyPlan(project, space, StudySettings(objective="loss"))
    write_plan(folder, plan)
    study = Study(folder, plan)
    try:
        assert RunFolderLock.held(folder)
        refused = distloop("sweep", "--resume", str(folder), timeout_s=60)
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            f"distloop: {folder}: the study is being run by process {os.getpid()}: "
            "stop it there first"
        )
    finally:
        study.close()
    assert not RunFolderLock.held(folder)
    assert not RunFolderLock.held(tmp_path)  # never locked: no lock file


HANGING_STEP = (
    GUIDE_STEP.replace(
        "RESULT", "tf.ensure_shape(tf.numpy_function(_hang_from_step_5, [loss], tf.float32), [])"
    )
    + """
import os
import time

CALLS = [0]


def _hang_from_step_5(loss):
    \"\"\"A step that never returns, as a hung data read or a deadlocked library would.\"\"\"
    CALLS[0] += 1
    if CALLS[0] >= 5:
        open(MARK, "w").close()
        time.sleep(3600)
    return loss
"""
)


@pytest.mark.slow
def test_a_trial_stuck_in_its_step_is_killed_by_the_stop_and_the_study_stops(
    tmp_path: Path,
) -> None:
    """A study stopped (Ctrl-C) while its trial's engine hangs in a step: the stop waits for
    the step, then kills the engine, as a run's stop does, so the study ends and keeps the
    trial's values to run again. The trial's run asked its engine to stop and waited for
    ever before (a `distloop sweep` that no Ctrl-C ended)."""
    from distloop.engine.study.runner import INTERRUPTED

    mark = tmp_path / "hanging"
    code = tmp_path / "step.py"
    code.write_text(HANGING_STEP.replace("MARK", repr(str(mark))))
    data = synthetic_project(1, steps=1000)
    data["custom_code"] = {"path": str(code)}
    project = load_project_data(data)
    space = parse_space('{"optimizer.learning_rate": {"low": 0.01, "high": 1}}', project)
    plan = StudyPlan(project, space, StudySettings(objective="loss", trials=2, sampler="random"))
    folder = tmp_path / "study"
    write_plan(folder, plan)
    study = Study(folder, plan)
    results = []
    try:
        started = time.monotonic()
        complete = study.run(on_trial=results.append, stopping=mark.exists)
        took_s = time.monotonic() - started
        trial = study.study.trials[0]  # then its values, queued again
    finally:
        study.close()
    assert mark.exists(), "the trial's step never hung"
    assert (complete, results) == (False, [])
    assert took_s < 600, f"the study waited {took_s:.0f} s for a step that never ends"
    status = read_status(folder / "trials" / "trial-0000")
    assert status["status"] == "stopped", status
    assert trial.user_attrs.get(INTERRUPTED) is True  # its values run again on resume


@pytest.mark.slow
def test_a_study_without_out_gets_a_new_folder_among_the_runs(tmp_path: Path) -> None:
    """The default folder was made as a run folder (a status.json in it), which the
    sweep then refused as not empty: no study could start without --out."""
    project = tmp_path / "project.json"
    project.write_text(json.dumps(synthetic_project(1, steps=6)))
    space = tmp_path / "space.json"
    space.write_text('{"optimizer.learning_rate": {"low": 0.01, "high": 0.1}}')
    data_home = tmp_path / "data"
    done = distloop(
        "sweep", str(project), "--space", str(space), "--trials", "1", "--pruner", "none",
        env={**os.environ, "XDG_DATA_HOME": str(data_home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (folder,) = (data_home / "distloop" / "runs").iterdir()
    assert folder.name.endswith("-invariance-x1-study")
    (events,) = folder.glob("events.out.tfevents.*.distloop-study")  # HParams' experiment
    assert sorted(p.name for p in folder.iterdir()) == sorted([
        ".distloop.lock", "study.db", "study.json", "trials", events.name,
    ])  # fmt: skip
    assert read_status(folder / "trials" / "trial-0000")["study_trial"] == 0


def test_a_grid_study_ends_at_its_last_point_not_in_a_traceback(tmp_path: Path) -> None:
    """Optuna's GridSampler asks the study to stop once its last point is told, which
    Optuna allows only inside study.optimize: the ask-and-tell study raised RuntimeError
    there. Trials hear the messages a run sends through its model, as distloop sweep's do."""
    from distloop.engine.messages import RunFinished
    from distloop.engine.run_model import RunModel
    from distloop.engine.study.runner import Study, TrialRun, write_plan

    project = _mlp()
    space = parse_space('{"optimizer.kind": {"values": ["adam", "sgd"]}}', project)
    plan = StudyPlan(project, space, StudySettings(sampler="grid", objective="loss", trials=5))
    assert plan.planned_trials() == 2  # no more trials than the grid has points
    folder = tmp_path / "study"
    write_plan(folder, plan)
    study = Study(folder, plan)
    try:
        tried = []
        while not study.is_complete():
            trial = study.ask()
            assert isinstance(trial, TrialRun)
            trial.run_dir.mkdir(parents=True)
            model = RunModel()
            model.subscribe(trial.apply)
            model.apply(StepMetrics(steps=[1, 2], losses=[1.0, 0.5], elapsed_s=[0.1, 0.2]))
            model.apply(RunFinished(status="finished", last_step=2, final_loss=0.5, elapsed_s=1))
            result = trial.end()
            assert result is not None and result.state == "complete"
            tried.append(result.params["optimizer.kind"])
    finally:
        study.close()
    assert sorted(tried) == ["adam", "sgd"]
    assert [t.state.name for t in _trials(folder)] == ["COMPLETE", "COMPLETE"]


def test_studies_and_their_trials_are_listed_among_the_runs(tmp_path: Path) -> None:
    """The window's Studies tab and Runs list read a study folder: how far it got (a
    trial stopped with the study counts as interrupted and runs again), whether a process
    runs it now, and its trials as runs, a pruned one with where and why."""
    from distloop.engine.messages import RunFinished
    from distloop.engine.run_folder import PROJECT_FILE, write_status
    from distloop.engine.run_history import list_runs
    from distloop.engine.run_model import RunModel
    from distloop.engine.study.folders import list_studies
    from distloop.engine.study.runner import Study, TrialRun, new_study_dir, write_plan

    project = _mlp()
    space = parse_space('{"optimizer.learning_rate": {"low": 0.01, "high": 1}}', project)
    plan = StudyPlan(project, space, StudySettings(objective="loss", trials=3))
    root = tmp_path / "runs"
    folder = new_study_dir(project.name, root)
    write_plan(folder, plan)
    study = Study(folder, plan)
    try:
        trials = [study.ask(), study.ask()]
        models = [RunModel(), RunModel()]
        for trial, model in zip(trials, models, strict=True):
            assert isinstance(trial, TrialRun)
            trial.run_dir.mkdir(parents=True)
            (trial.run_dir / PROJECT_FILE).write_text(trial.project.to_json())
            model.subscribe(trial.apply)
            model.apply(StepMetrics(steps=[1], losses=[1.0], elapsed_s=[0.1]))
        models[0].apply(RunFinished(status="finished", last_step=1, final_loss=1, elapsed_s=1))
        assert trials[0].end() is not None
        assert trials[1].interrupt() and trials[1].end() is None
        (running,) = list_studies(root)
        assert (running.state, running.ended, running.planned) == ("running", 1, 3)
        assert (running.interrupted, running.waiting) == (1, 1)
    finally:
        study.close()
    (stopped,) = list_studies(root)
    assert stopped.state == "stopped" and stopped.name == project.name
    write_status(
        trials[0].run_dir, "pruned", pruned_at=7, pruned_reason="pruned at step 7 by the median"
    )
    runs = {run.path: run for run in list_runs(root)}
    assert set(runs) == {t.run_dir for t in trials}
    pruned = runs[trials[0].run_dir]
    assert pruned.status == "pruned" and pruned.pruned == (7, "pruned at step 7 by the median")
    assert pruned.study == folder and pruned.matches(folder.name)
    assert runs[trials[1].run_dir].pruned is None
    model = RunModel()
    model.prune(7, "why")
    model.apply(RunFinished(status="stopped", last_step=8, final_loss=1, elapsed_s=1))
    assert model.status == "pruned" and model.pruned == (7, "why")


def _quadratic(tmp_path: Path, steps: int) -> Path:
    """loss = (w - 1)^2 from w = 0, one constant example, plain SGD: the gradient is
    2 (w - 1), so step k's loss is (1 - 2 lr)^(2 (k - 1)). Learning rate 0.5 lands on
    w = 1 in one step and is the best there is; further from 0.5 either way more loss
    is left after the same steps; over 30 steps a rate above about 2.8 makes the loss
    grow past float32 (inf) before the run ends."""
    project = tmp_path / "quadratic.json"
    project.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "name": "quadratic",
                "strategy": {"kind": "default"},
                "model": {
                    "input_shape": [1],
                    "layers": [
                        {
                            "kind": "dense",
                            "units": 1,
                            "use_bias": False,
                            "kernel_initializer": {"kind": "zeros"},
                            "kernel_regularizer": None,
                        }
                    ],
                },
                "optimizer": {"kind": "sgd", "learning_rate": 0.1},
                "loss": {"kind": "mean_squared_error"},
                "data": {
                    "source": "constant",
                    "features": [1.0],
                    "labels": [1.0],
                    "examples": 1000,
                    "global_batch_size": 1,
                },
                "training": {"steps": steps, "seed": 0},
            }
        )
    )
    return project


def _sweep(
    tmp_path: Path, steps: int, space: dict, *options: str
) -> tuple[subprocess.CompletedProcess, Path]:
    space_file = tmp_path / "space.json"
    space_file.write_text(json.dumps(space))
    folder = tmp_path / "study"
    done = distloop(
        "sweep", str(_quadratic(tmp_path, steps)), "--space", str(space_file),
        "--objective", "loss", "--out", str(folder), *options, timeout_s=600,
    )  # fmt: skip
    return done, folder


@pytest.fixture(scope="module")
def grid_study(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess, Path]:
    """A grid of three learning rates, one of them too high (its loss overflows), asked
    for five trials."""
    return _sweep(
        tmp_path_factory.mktemp("grid"),
        30,
        {"optimizer.learning_rate": {"values": [0.05, 0.5, 30.0]}},
        "--sampler", "grid", "--pruner", "none", "--trials", "5",
    )  # fmt: skip


@pytest.mark.slow
def test_a_grid_study_tries_each_point_once_and_a_nan_trial_fails_alone(grid_study) -> None:
    """Optuna's grid sampler stopped the study from inside ``tell`` (a RuntimeError: only
    ``study.optimize`` may stop), which failed the study at its last point; a grid asked
    for more trials than it has points ran some twice. The SQLite study and the run
    folders agree: values, states, statuses, and each objective is the smoothed loss the
    Runs list shows for the trial's folder."""
    done, folder = grid_study
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    trials = _trials(folder)
    rates = [t.params["optimizer.learning_rate"] for t in trials]
    assert sorted(rates) == [0.05, 0.5, 30.0]
    for trial in trials:
        run_dir = Path(trial.user_attrs["run_dir"])
        status = read_status(run_dir)
        assert status["study_trial"] == trial.number
        project = json.loads((run_dir / "project.json").read_text())
        assert project["optimizer"]["learning_rate"] == trial.params["optimizer.learning_rate"]
        if trial.params["optimizer.learning_rate"] == 30.0:
            # the loss overflowed: a failed trial, and the study went on
            assert (trial.state.name, status["status"], trial.value) == ("FAIL", "failed", None)
            assert "the loss became inf" in status["error"]
        else:
            assert (trial.state.name, status["status"]) == ("COMPLETE", "finished")
            # metrics.csv holds each float32 loss as its shortest text: equal to 1e-7
            assert trial.value == pytest.approx(summarize(run_dir).smoothed_loss, rel=1e-6)
    best = min((t for t in trials if t.state.name == "COMPLETE"), key=lambda t: t.value)
    assert best.params["optimizer.learning_rate"] == 0.5
    assert f"best: trial {best.number} loss=0 optimizer.learning_rate=0.5" in done.stdout


READ_HPARAMS = """
import json, sys
from tensorboard import context
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.plugins import base_plugin
from tensorboard.plugins.hparams import (
    api_pb2, backend_context, get_experiment, list_session_groups,
)

logdir = sys.argv[1]
mux = plugin_event_multiplexer.EventMultiplexer()
mux.AddRunsFromDirectory(logdir)
mux.Reload()
provider = data_provider.MultiplexerDataProvider(mux, logdir)
backend = backend_context.Context(
    base_plugin.TBContext(logdir=logdir, multiplexer=mux, data_provider=provider)
)
ctx = context.RequestContext()
experiment = get_experiment.Handler(ctx, backend, "", api_pb2.GetExperimentRequest()).run()
request = api_pb2.ListSessionGroupsRequest(
    start_index=0, slice_size=100, allowed_statuses=[0, 1, 2, 3]
)
for info in experiment.hparam_infos:
    request.col_params.add(hparam=info.name, include_in_result=True)
for info in experiment.metric_infos:
    request.col_params.add(metric=info.name, include_in_result=True)
groups = list_session_groups.Handler(ctx, backend, "", request).run().session_groups
print(json.dumps({
    "hparams": {
        info.name: [v.number_value for v in info.domain_discrete.values]
        for info in experiment.hparam_infos
    },
    "metrics": [info.name.tag for info in experiment.metric_infos],
    "sessions": {
        group.name: {
            "hparams": {k: v.number_value for k, v in group.hparams.items()},
            "status": api_pb2.Status.Name(group.sessions[0].status),
            "metrics": {m.name.tag: m.value for m in group.metric_values},
        }
        for group in groups
    },
}))
"""


@pytest.fixture(scope="session")
def tensorboard_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python with TensorBoard (which TensorFlow no longer installs): a venv of its own
    beside this one's packages, so the tests read with TensorBoard's own code."""
    venv = tmp_path_factory.mktemp("tensorboard-venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "tensorboard"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    return python


@pytest.mark.slow
def test_tensorboard_lists_the_trials_in_its_hparams_dashboard(
    grid_study, tensorboard_python: Path
) -> None:
    """The study folder as ``tensorboard --logdir`` reads it: the HParams plugin's own
    handlers (what its dashboard asks) list every trial with its value and objective."""
    folder = grid_study[1]
    read = subprocess.run(
        [str(tensorboard_python), "-c", READ_HPARAMS, str(folder)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert read.returncode == 0, read.stderr[-3000:]
    shown = json.loads(read.stdout)
    assert shown["hparams"] == {"optimizer.learning_rate": [0.05, 0.5, 30.0]}
    assert shown["metrics"] == ["study/loss"]
    expected = {}
    for trial in _trials(folder):
        session = f"trials/trial-{trial.number:04d}/tensorboard"
        status = "STATUS_SUCCESS" if trial.state.name == "COMPLETE" else "STATUS_FAILURE"
        metrics = {} if trial.value is None else {"study/loss": pytest.approx(trial.value)}
        expected[session] = {"hparams": trial.params, "status": status, "metrics": metrics}
    assert shown["sessions"] == expected


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tpe_with_a_fixed_seed_finds_the_best_learning_rate_in_12_trials(tmp_path: Path) -> None:
    """The quadratic's best rate is 0.5 (one step to the minimum); after 5 steps the loss
    is (1 - 2 lr)^8, lower the closer the rate is to 0.5. Over [0.01, 3], log uniform,
    a random trial lands within 20% of 0.5 with probability 0.07 (12 of them: 0.59); TPE
    with seed 2 misses with its 3 random trials and then, modelling the results, gets
    there within its 12 (in simulations of this objective it did so for 18 seeds of 20,
    random search for 10)."""
    done, folder = _sweep(
        tmp_path,
        5,
        {"optimizer.learning_rate": {"low": 0.01, "high": 3.0, "log": True}},
        "--sampler", "tpe", "--pruner", "none", "--trials", "12", "--seed", "2",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    trials = _trials(folder)
    assert len(trials) == 12 and all(t.state.name == "COMPLETE" for t in trials)
    rates = [t.params["optimizer.learning_rate"] for t in trials]
    assert not any(0.4 <= rate <= 0.6 for rate in rates[:3]), rates  # the random start
    best = min(trials, key=lambda t: t.value)
    assert 0.4 <= best.params["optimizer.learning_rate"] <= 0.6, rates
    assert best.number >= 3


def test_a_cmaes_study_is_driven_by_cma_es(tmp_path: Path) -> None:
    """Optuna's CmaEsSampler needs the cmaes package, now a dependency: without it the
    sampler fell back to random sampling (or failed) instead of CMA-ES."""
    project = _mlp()
    space = parse_space(
        '{"optimizer.learning_rate": {"low": 1e-4, "high": 1, "log": true},'
        ' "model.layers.0.units": {"low": 4, "high": 64}}',
        project,
    )
    plan = StudyPlan(project, space, StudySettings(sampler="cmaes", objective="loss", seed=1))
    assert plan.problems() == []
    study = Study(tmp_path, plan).study
    for _ in range(4):
        trial = study.ask()
        rate = trial.suggest_float("optimizer.learning_rate", 1e-4, 1, log=True)
        units = trial.suggest_int("model.layers.0.units", 4, 64)
        study.tell(trial, (rate - 0.01) ** 2 + units / 100)
    # The first trial is random (nothing to adapt to yet); CMA-ES proposes the rest.
    driven = [any(key.startswith("cma:") for key in t.system_attrs) for t in study.trials]
    assert driven == [False, True, True, True]


def test_resuming_a_folder_whose_study_db_is_another_studys_is_one_line(tmp_path: Path) -> None:
    """A study.db copied in from another project's study (other fields searched), or no
    Optuna storage at all: --resume says so in one line and changes nothing."""
    import optuna

    project = _mlp()
    space = parse_space(
        '{"optimizer.learning_rate": {"low": 1e-4, "high": 1, "log": true}}', project
    )
    folder = tmp_path / "study"
    write_plan(folder, StudyPlan(project, space, StudySettings(objective="loss")))
    other = optuna.create_study(study_name="distloop", storage=f"sqlite:///{folder}/study.db")
    other.add_trial(
        optuna.trial.create_trial(
            params={"model.layers.0.units": 8},
            distributions={"model.layers.0.units": optuna.distributions.IntDistribution(4, 64)},
            value=1.0,
        )
    )
    before = sorted((p.name, p.read_bytes()) for p in folder.iterdir())
    refused = distloop("sweep", "--resume", str(folder), timeout_s=60)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        f"distloop: {folder}: study.db holds another study's trials: they search "
        "model.layers.0.units over [4, 64], study.json does not search it; nothing was changed"
    ]
    assert sorted((p.name, p.read_bytes()) for p in folder.iterdir()) == before
    (folder / "study.db").write_text("not a database")
    before_text = sorted((p.name, p.read_bytes()) for p in folder.iterdir())
    refused = distloop("sweep", "--resume", str(folder), timeout_s=60)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "study.db is damaged or no Optuna storage" in refused.stderr
    assert sorted((p.name, p.read_bytes()) for p in folder.iterdir()) == before_text


def test_a_trial_that_ends_before_its_pruning_stop_counts_as_complete(tmp_path: Path) -> None:
    """A short run can reach its last step before the stop the pruner asked for arrives:
    it trained in full, so it is complete with its objective, not 'pruned' at 400 of 400
    steps (seen in the window on a 400-step study)."""
    from distloop.engine.messages import RunFinished
    from distloop.engine.run_model import RunModel
    from distloop.engine.study.runner import Study, TrialRun, write_plan

    project = _mlp()  # 40 steps: the loss is reported every 4
    space = parse_space('{"optimizer.learning_rate": {"low": 0.01, "high": 1}}', project)
    plan = StudyPlan(project, space, StudySettings(objective="loss", trials=4, sampler="random"))
    folder = tmp_path / "study"
    write_plan(folder, plan)
    study = Study(folder, plan)
    results = []
    try:
        for loss, end in (
            (0.1, "finished"),
            (0.1, "finished"),
            (5.0, "finished"),
            (5.0, "stopped"),
        ):
            trial = study.ask()
            assert isinstance(trial, TrialRun)
            trial.run_dir.mkdir(parents=True)
            steps = tuple(range(1, 41))
            pruned = trial.apply(StepsAdded(steps, (loss,) * 40, (0.0,) * 40))
            assert pruned == (loss == 5.0)
            last = 40 if end == "finished" else 4
            trial.apply(StatusChanged(end, RunOutcome(end, last, loss, elapsed_s=1.0)))
            results.append(trial.end())
    finally:
        study.close()
    assert [r.state for r in results] == ["complete", "complete", "complete", "pruned"]
    assert results[2].value == pytest.approx(5.0)
    assert read_status(results[2].run_dir).get("pruned_at") is None
    assert read_status(results[3].run_dir)["pruned_at"] == 4
    model = RunModel()
    model.prune(4, "why")
    model.apply(RunFinished(status="finished", last_step=40, final_loss=5, elapsed_s=1))
    assert (model.status, model.pruned) == ("finished", None)


HUGE_CHOICE = (
    "UPDATE trial_params SET distribution_json = "
    """'{"name": "CategoricalDistribution", "attributes": {"choices": ["sgd", "' """
    """|| hex(zeroblob(26214400)) || '"]}}' WHERE param_name = 'optimizer.kind';"""
)


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        pytest.param(ENDLESS_TRIALS, "study.db holds a view 'trials', which no Optuna", id="view"),
        pytest.param(
            "CREATE TRIGGER t AFTER UPDATE ON trials BEGIN DELETE FROM studies; END;",
            "study.db holds a trigger 't', which no Optuna storage has",
            id="trigger",
        ),
        pytest.param(
            "CREATE TABLE notes (x);",
            "study.db holds a table 'notes', which no Optuna storage has",
            id="table",
        ),
        pytest.param(
            HUGE_CHOICE,
            "holds another study's trials: they search optimizer.kind in ['sgd', '000000",
            id="50-MiB-value",
        ),
    ],
)
def test_a_crafted_study_db_is_refused_in_one_line_and_listed_unreadable(
    sql: str, says: str, tmp_path: Path
) -> None:
    """A study folder is anyone's: its study.db is checked before Optuna reads it (an
    endless view hung --resume and filled the window's memory), and what it holds is
    quoted shortened (a 50 MiB value was echoed whole)."""
    folder = crafted_study_folder(tmp_path / "runs" / "crafted", sql)
    before = sorted((p.name, p.read_bytes()) for p in folder.iterdir() if p.is_file())
    refused = distloop("sweep", "--resume", str(folder), timeout_s=180)
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert says in refused.stderr
    assert len(refused.stderr) < 2000
    assert sorted((p.name, p.read_bytes()) for p in folder.iterdir() if p.is_file()) == before
    (entry,) = list_studies(tmp_path / "runs")
    if sql is not HUGE_CHOICE:  # a storage of Optuna's own shape, only another search's
        assert entry.state == "unreadable" and says in entry.error


def test_hostile_values_of_a_crafted_study_reach_hparams_and_the_terminal_escaped(
    tmp_path: Path,
) -> None:
    """A study.json is anyone's file: a choice holding a lone surrogate crashed the
    HParams summary (UnicodeEncodeError, a traceback before the first trial), and one
    holding terminal escapes was printed raw on each trial's line."""
    hostile = "\ud800\x1b[2J\u202e"
    data = synthetic_project(1, steps=4)
    data["name"] = "name \u202e\x1b]0;title\x07"
    project = load_project_data(data)
    space = space_from_data({"description": {"values": [hostile, "plain"]}}, project)
    settings = StudySettings(trials=2, sampler="grid", pruner="none", objective="loss")
    folder = tmp_path / "study"
    write_plan(folder, StudyPlan(project, space, settings))
    done = distloop("sweep", "--resume", str(folder), timeout_s=400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "description=\\ud800\\x1b[2J\\u202e" in done.stdout
    assert "\x1b" not in done.stdout + done.stderr and "\u202e" not in done.stdout
    from tensorflow.core.util import event_pb2

    events = [*folder.glob("events.out.tfevents.*"), *folder.glob("trials/*/tensorboard/*study")]
    contents = []
    for path in events:
        data_bytes, at = path.read_bytes(), 0
        while at < len(data_bytes):
            (length,) = struct.unpack_from("<Q", data_bytes, at)
            parsed = event_pb2.Event.FromString(data_bytes[at + 12 : at + 12 + length])
            at += 16 + length
            contents += [v.metadata.plugin_data.content for v in parsed.summary.value]
    # The experiment, and the session of the trial that ran: the hostile value makes a
    # trial name no project may have, so that trial fails on its line, before a run.
    assert len(events) == 2
    assert " failed after 0 steps description=\\ud800\\x1b[2J\\u202e: " in done.stdout
    # The surrogate as its escape (a protobuf string is UTF-8), the rest as it was.
    assert any(b"\\ud800\x1b[2J\xe2\x80\xae" in content for content in contents)


def test_a_storage_query_past_its_deadline_is_one_unreadable_line(tmp_path: Path) -> None:
    """What no schema check can foresee (a legitimate table too large to read in time) is
    stopped by the connection's deadline, and said in one line."""
    import sqlite3

    from distloop.engine.study.storage import READ_SECONDS, bounded_connection, unreadable

    database = tmp_path / "study.db"
    sqlite3.connect(database).close()
    connection = bounded_connection(database, time.monotonic() + 1.0)
    endless = "WITH RECURSIVE r(a) AS (SELECT 1 UNION ALL SELECT a + 1 FROM r) SELECT max(a) FROM r"
    with pytest.raises(sqlite3.OperationalError) as caught:
        connection.execute(endless).fetchall()
    connection.close()
    said = str(unreadable(database, caught.value))
    assert said == f"{database} could not be read within {READ_SECONDS:.0f} s"


def test_a_crafted_study_db_is_refused_before_optuna_opens_it_to_write(tmp_path: Path) -> None:
    """The window's Continue opens the study without the command line's checks: Optuna's
    writable storage would run the file's trigger or read its endless view."""
    from distloop.engine.run_folder import RunFolderLock
    from distloop.engine.study.runner import read_plan

    folder = crafted_study_folder(tmp_path / "crafted", ENDLESS_TRIALS)
    with pytest.raises(ProblemsError, match="holds a view 'trials', which no Optuna storage"):
        Study(folder, read_plan(folder))
    assert not RunFolderLock.held(folder)  # let go: the folder is not left locked
