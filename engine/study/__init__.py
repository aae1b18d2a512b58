"""Studies: searches over any project setting, with Optuna as the search engine (TF-free).

``space``      the search space: project fields by dotted path, checked before a study
               starts
``objective``  what a trial is judged by, read from its live messages (and when to report
               it for pruning)
``runner``     :class:`Study`: Optuna asks, a real run trains, the messages answer; the
               study folder (plan, SQLite storage, one run folder per trial) persists

``distloop sweep`` is the command line's door to it.
"""

STUDY_FILE = "study.json"
"""What marks a folder as a study's: the project, the space and the settings."""
TRIALS_DIR = "trials"
"""The study's subfolder of run folders, one per trial (``trial-NNNN``)."""
