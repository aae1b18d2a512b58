"""The run going on now: how it starts, its session with the engine, and the views
that follow it.

``run_starter.py`` is what happens between Run (or the queue's next item, or Resume)
and the engine's start; ``run_controller.py`` is one run's session with its engine,
kept out of the widgets. The views: ``loss_plot.py`` (its growing buffers and smoothing
in ``series.py``), ``status_panel.py``, ``log_panel.py`` and ``cluster_panel.py`` (a
local cluster's tasks). A cluster on other machines: ``host_runs.py`` (Check Cluster,
Run on Hosts, Submit to Slurm, Dump Stacks; the hosts are the project editor's
``project/hosts_panel.py``), ``slurm_dialog.py`` (the job's shape) and
``background.py`` (their ssh and pre-flight work, off the window's thread).
"""
