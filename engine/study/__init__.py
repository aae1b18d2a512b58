"""Studies: searches over any project setting, with Optuna as the search engine (TF-free).

``space``      the search space: project fields by dotted path, checked before a study
               starts
``objective``  what a trial is judged by, read from its live messages (and when to report
               it for pruning)
``runner``     :class:`Study`: Optuna asks, a real run trains, the messages answer; the
               study folder (plan, SQLite storage, one run folder per trial) persists

``distloop sweep`` is the command line's door to it. A study folder's names (``study.json``,
``trials/``) are ``engine.run_folder``'s, where the list of past runs reads them too.
"""
