"""Files and folders on disk as the window reads and writes them for the user.

``file_dialogs.py`` starts each file dialog where the last one for its purpose ended; ``exports.py``
writes a run's metrics, the plot or the project as a script, ``export_dialog.py`` the
cluster setup for real hosts; ``folder_scans.py`` scans data folders for the validation
in a worker process (``folder_scan_worker.py``, Qt-free); ``dataset_preview.py`` shows
what the data section points at; ``log_file_window.py`` shows a run's log file.
"""
