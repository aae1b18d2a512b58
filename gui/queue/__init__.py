"""The run queue: runs waiting their turn, each started through the window's own Run
path, and their results ranked.

``run_queue.py`` drives the engine's queue order from the window's run signals;
``queue_model.py`` is the table model of the queue and of its results;
``queue_panel.py`` is the dock that shows both.
"""
