"""Distloop's desktop app (PySide6). Never imports TensorFlow: engines run in subprocesses.

``launcher.py`` is the ``distloop`` command (the window without arguments, the engine's
subcommands otherwise; Qt is loaded only for the window). The window's modules are
grouped by feature, a folder each, whose ``__init__.py`` says what it holds:

- ``shell/``: the app's start, the main window that wires the rest, settings, dialogs,
  help;
- ``project/``: the project's forms, the editor holding them and the document (its file,
  its changes, its validation);
- ``run/``: the run going on: how it starts, its engine session, the plot, status, log
  and cluster views, and clusters on other hosts (Run on Hosts, Slurm);
- ``runs/``: past runs: the Runs tab and Try It;
- ``queue/``: the run queue and its results;
- ``study/``: Optuna studies: Add Sweep, the trials run in the window, the Studies and
  Study tabs;
- ``files/``: file dialogs, exports, data folder scans, the dataset preview, log files;
- ``widgets/``: small widgets and table helpers several of those share.
"""
