"""Small widgets and table helpers that several of the window's folders share.

``elided_label.py``: a one-line label that shortens its text to the width it gets;
``tables.py``: how the window's lists of rows look and select (runs, queue, studies,
trials).
"""
