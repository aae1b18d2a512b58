"""Runs into MLflow: one distributed job is one MLflow run (TF-free, Qt-free).

MLflow's own integrations log from each worker, so a cluster job of four workers becomes
four runs (mlflow#11782, #5817). Distloop logs from the one process that follows the job
(or afterwards, from its folder), so a job is one run: the project's settings as params,
the chief's every step and evaluation as metrics, each task's system metrics and
environment under the task's name, the model and the project as artifacts.

- :mod:`.records`: what a job's or a study's folder holds, read without MLflow.
- :mod:`.tracking`: MLflow's client, imported when first used, in MLflow's batches; every
  failure one :class:`MlflowLogError` line.
- :mod:`.live`: :class:`LiveLogger`, a run model's listener that logs as the run trains.
"""

from __future__ import annotations

from .live import LiveLogger, LiveSettings
from .records import NotAJobFolder, flat_params, read_job
from .tracking import DEFAULT_EXPERIMENT, INSTALL_HINT, MlflowLogError, log_folder

__all__ = [
    "DEFAULT_EXPERIMENT",
    "INSTALL_HINT",
    "LiveLogger",
    "LiveSettings",
    "MlflowLogError",
    "NotAJobFolder",
    "flat_params",
    "log_folder",
    "read_job",
]
