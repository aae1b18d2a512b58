"""Small widgets and table helpers that several of the window's folders share.

``elided_label.py``: a one-line label that shortens its text to the width it gets;
``close_keys.py``: a Close button, Esc and Ctrl+W for a window of its own;
``flow_layout.py``: a row of widgets that wraps onto more lines in a narrow place;
``tables.py``: how the window's lists of rows look and select (runs, queue, studies,
trials).
"""
