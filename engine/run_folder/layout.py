"""The names of a run folder's files and folders, in one place.

The writers, the readers and the list of what a run folder may hold
(:mod:`engine.run_folder.trust`) all spell them from here, so a file a run writes is
never one that ``--overwrite`` or a resume takes for a stranger's.
"""

from __future__ import annotations

PROJECT_FILE = "project.json"
METRICS_FILE = "metrics.csv"
EVAL_FILE = "eval.csv"
SYSTEM_METRICS_FILE = "system_metrics.csv"
"""Each task's CPU, memory, disk, GPU use and input wait, once a second
(``engine.system_metrics``)."""
STATUS_FILE = "status.json"
ENVIRONMENT_FILE = "environment.json"
"""What made the run: versions, packages, machine, seed, git (``engine.run_environment``)."""
LOG_FILE = "engine.log"
STACKS_FILE = "stacks.txt"
"""The engine's Python stacks, appended on SIGUSR1 (``engine.stack_dumps``)."""
MESSAGES_FILE = "messages.jsonl"
"""The run's protocol messages as JSON lines (``distloop run --record-messages``): how a
follower on another machine of a shared file system reads a Slurm task's run."""
CHECKPOINT_DIR = "checkpoints"
CHECKPOINT_INDEX_FILE = "checkpoint"
"""TensorFlow's index of a checkpoint folder: which checkpoint is the latest."""
TENSORBOARD_DIR = "tensorboard"
MODEL_FILE = "model.keras"
"""The trained model a finished or stopped run leaves (``engine.tf.model_export``)."""
MODEL_RECORD_FILE = "model.json"
"""Which weights ``model.keras`` holds: the step, and its val_loss when chosen by it."""
SAVED_MODEL_DIR = "saved_model"
"""The TF Serving export of ``model.keras``, with ``training.export_saved_model``."""
CONFUSION_FILE = "confusion.json"
"""A classifier's confusion matrix on the validation data, for ``model.keras``."""
CLASSES_FILE = "classes.json"
"""The class names of the run's data, where the data has them (image folders)."""
VOCABULARY_FILE = "vocabulary.json"
"""A text-folder run's vocabulary: prediction turns texts into the numbers training used."""
FINDER_FILE = "finder.json"
"""What a finder run tries (``engine.lr_finder``): a rate range, or one batch size. The folder
is a finder's trial, never a training run to resume or list."""
LR_CURVE_FILE = "lr_find.csv"
"""A finder run's curve: each step's rate, loss and smoothed loss."""
TASKS_DIR = "tasks"
"""A cluster run's task folders, one run folder each (``engine.cluster``)."""
LOCK_FILE = ".distloop.lock"
LABEL_FILE = "label.txt"
"""Where earlier versions kept a name given by the user: still read, never written."""
CREATED = "created"
"""The status of a folder :func:`new_run_dir` made, before any run wrote to it."""
STUDY_FILE = "study.json"
"""What marks a folder as a study's (``engine.study``): the project, the space and the
settings. Named here, beside the run folder's names, because the list of past runs
(``engine.run_history``) tells a study's folder from a run's and lists its trials."""
TRIALS_DIR = "trials"
"""A study's subfolder of run folders, one per trial (``trial-NNNN``)."""
