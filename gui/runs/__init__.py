"""Past runs: the Runs tab's list of run folders, to reopen, compare, rename, delete,
resume or try.

``runs_panel.py`` and its table model ``runs_model.py``; ``run_table.py`` formats and
sorts the cells every table of runs shows (the queue's results too); ``run_scanner.py``
summarizes long runs' metrics in a worker thread; ``environment_diff.py`` shows what differs
between the compared runs' recorded environments; ``try_it_panel.py`` runs a past run's
saved model on dropped files or a pasted row.
"""
