"""A run's folder on disk: the project as run, every step's loss, and how it ended.

Layout (one folder per run; a cluster task gets one of its own)::

    project.json   the validated project exactly as it ran
    metrics.csv    step,loss,elapsed_s[,<named loss>,...][,replica_0,...]: appended and flushed
                   as the run goes; one column per named loss of custom step code
    eval.csv       step,val_loss,val_accuracy|val_mae: one row per evaluation, when evaluating
    environment.json  what made the run: versions, packages, machine, seed, git commit
    status.json    created / running / finished / stopped / failed, with the error when
                   failed; the run's name, notes and tags; when it started and last resumed
    engine.log     the engine's log lines and TensorFlow's output
    checkpoints/   model, optimizer and step counter (``engine.tf.checkpoint``); in a cluster,
                   the chief's (copied to the other tasks when the run resumes)
    tensorboard/   the chief's TensorBoard event files (``engine.tf.tensorboard``)
    model.keras    the trained model, when the run finished or stopped: with evaluation, the
                   weights of the lowest val_loss; model.json says which step they are
    saved_model/   the same model for TF Serving, with training.export_saved_model
    confusion.json a classifier's confusion matrix on the validation data (with evaluation)
    classes.json   the class names in label order, for data that names them (image and text
                   folders)
    vocabulary.json  a text folder's vocabulary (the training split's words, in number order)
    .distloop.lock locked while a run writes the folder (:class:`RunFolderLock`)

The engine process writes all of it, so a run keeps its record when the GUI dies;
the parent only writes ``status.json`` when it makes the folder (the run's name)
and when the engine died too abruptly to record the end. The top level of a local
cluster's run folder is the exception: the launcher writes it, from the chief's
messages and what only it sees (``engine.cluster.top_folder`` says why); each task's
engine writes its own folder under ``tasks/``.
A run folder may come from anyone ("resume my run", "try my model"), so nothing
here follows a symbolic link when it opens, replaces or deletes, and a resume
refuses a folder with a link in it (:func:`prepare_resume`): a crafted link must not
make a run read, write or delete elsewhere. The small JSON files are read with a size
cap (:func:`load_json`); what a run folder may hold is defined once
(:func:`unknown_entries`), so ``--overwrite`` replaces a run folder and nothing else.

One module per job, and this package's names (``__all__``) are the one surface the
rest of Distloop imports from:

- :mod:`.layout`: the names of the files and folders above.
- :mod:`.folder_io`: :class:`RunFolderError`, and writing and reading the small files
  (atomic, never through a link, JSON with a size cap).
- :mod:`.naming`: where runs go, and a new run folder's name and run name.
- :mod:`.lock`: :class:`RunFolderLock`, one writer per folder, and its disk reserve.
- :mod:`.trust`: what a run folder may hold and the checks before a resume.
- :mod:`.csv_files`: ``metrics.csv`` and ``eval.csv``, written, cut back and read.
- :mod:`.status`: ``status.json``.
- :mod:`.environment`: ``environment.json``.
- :mod:`.model_files`: what prediction reads (the model's folder, classes, vocabulary,
  confusion matrix, model record), and the classes and vocabulary written beside it.
- :mod:`.engine_log`: ``engine.log``'s records and its tail.
"""

from __future__ import annotations

from .csv_files import (
    METRICS_COLUMNS,
    REPLICA_PREFIX,
    EvalWriter,
    MetricsWriter,
    format_loss,
    loss_columns,
    read_eval,
    read_metrics,
    replica_column,
    truncate_eval,
    truncate_metrics,
)
from .engine_log import (
    TAIL_BYTES,
    log_line,
    open_log,
    tail_log,
)
from .environment import (
    ENVIRONMENT_READ_LIMIT,
    read_environment,
    write_environment,
)
from .folder_io import (
    STATUS_READ_LIMIT,
    RunFolderError,
    folder_deleted_error,
    folder_write_error,
    load_json,
)
from .layout import (
    CHECKPOINT_DIR,
    CHECKPOINT_INDEX_FILE,
    CLASSES_FILE,
    CONFUSION_FILE,
    CREATED,
    ENVIRONMENT_FILE,
    EVAL_FILE,
    FINDER_FILE,
    LABEL_FILE,
    LOCK_FILE,
    LOG_FILE,
    LR_CURVE_FILE,
    MESSAGES_FILE,
    METRICS_FILE,
    MODEL_FILE,
    MODEL_RECORD_FILE,
    PROJECT_FILE,
    SAVED_MODEL_DIR,
    STACKS_FILE,
    STATUS_FILE,
    STUDY_FILE,
    SYSTEM_METRICS_FILE,
    TASKS_DIR,
    TENSORBOARD_DIR,
    TRIALS_DIR,
    VOCABULARY_FILE,
)
from .lock import (
    RESERVE_BYTES,
    RunFolderBusy,
    RunFolderLock,
)
from .model_files import (
    JSON_READ_LIMIT,
    class_names,
    find_model_folder,
    has_model,
    read_confusion,
    read_model_record,
    saved_model_folder,
    saved_vocabulary,
    write_classes,
    write_vocabulary,
)
from .naming import (
    default_runs_root,
    folder_stamp,
    new_folder,
    new_run_dir,
)
from .status import (
    read_status,
    update_status,
    write_status,
)
from .trust import (
    INDEX_READ_LIMIT,
    check_checkpoint_indexes,
    empty_run_folder,
    folder_entries,
    has_checkpoint,
    not_a_run_folder,
    prepare_resume,
    refuse_links,
    remove_path,
    remove_stale_temporaries,
    unknown_entries,
)

__all__ = [
    "CHECKPOINT_DIR",
    "CHECKPOINT_INDEX_FILE",
    "CLASSES_FILE",
    "CONFUSION_FILE",
    "CREATED",
    "ENVIRONMENT_FILE",
    "ENVIRONMENT_READ_LIMIT",
    "EVAL_FILE",
    "FINDER_FILE",
    "INDEX_READ_LIMIT",
    "JSON_READ_LIMIT",
    "LABEL_FILE",
    "LOCK_FILE",
    "LOG_FILE",
    "LR_CURVE_FILE",
    "MESSAGES_FILE",
    "METRICS_COLUMNS",
    "METRICS_FILE",
    "MODEL_FILE",
    "MODEL_RECORD_FILE",
    "PROJECT_FILE",
    "REPLICA_PREFIX",
    "RESERVE_BYTES",
    "SAVED_MODEL_DIR",
    "STACKS_FILE",
    "STATUS_FILE",
    "STATUS_READ_LIMIT",
    "STUDY_FILE",
    "SYSTEM_METRICS_FILE",
    "TAIL_BYTES",
    "TASKS_DIR",
    "TENSORBOARD_DIR",
    "TRIALS_DIR",
    "VOCABULARY_FILE",
    "EvalWriter",
    "MetricsWriter",
    "RunFolderBusy",
    "RunFolderError",
    "RunFolderLock",
    "check_checkpoint_indexes",
    "class_names",
    "default_runs_root",
    "empty_run_folder",
    "find_model_folder",
    "folder_deleted_error",
    "folder_entries",
    "folder_stamp",
    "folder_write_error",
    "format_loss",
    "has_checkpoint",
    "has_model",
    "load_json",
    "log_line",
    "loss_columns",
    "new_folder",
    "new_run_dir",
    "not_a_run_folder",
    "open_log",
    "prepare_resume",
    "read_confusion",
    "read_environment",
    "read_eval",
    "read_metrics",
    "read_model_record",
    "read_status",
    "refuse_links",
    "remove_path",
    "remove_stale_temporaries",
    "replica_column",
    "saved_model_folder",
    "saved_vocabulary",
    "tail_log",
    "truncate_eval",
    "truncate_metrics",
    "unknown_entries",
    "update_status",
    "write_classes",
    "write_environment",
    "write_status",
    "write_vocabulary",
]
