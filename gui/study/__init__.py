"""Optuna studies in the window: the studies ``distloop sweep`` runs, started,
followed and shown here.

``study_flow.py`` owns Add Sweep… and starts, continues and offers to continue a study;
``study_dialog.py`` (Add Sweep…) gathers the search space and the study's settings;
``study_session.py`` runs each trial through the window's Run path;
``studies_panel.py`` lists the studies among the runs; ``study_views.py`` shows one
study's trials (``study_trials.py``, their table model) and plots (``study_plots.py``).
"""
