"""What the window's feature folders share and ask, below all of them.

``settings.py``: what is remembered between sessions (QSettings); ``dialogs.py``: the
modal questions and reports, in one place so tests can answer them. They lived in
``shell/``, the window's top, which every folder then imported upwards.
"""
