"""The window's frame: the app's start, the main window, and what every part of it asks.

``app.py`` starts the QApplication with asyncio in its event loop (``interrupts.py``
answers Ctrl-C there); ``main_window.py`` builds the layout, actions and menus and wires
the project document, the run starter and controller, the queue, the runs and the
studies to the views. Beside them what the whole window shares: ``settings.py`` (what
is remembered between sessions), ``dialogs.py`` (the modal questions, in one place so
tests can answer them), ``focus_return.py`` (the focus back in its field after a dialog)
and ``help_windows.py`` (the shortcuts and the guide).
``system_libraries.py`` is Qt-free: the ``distloop`` command (``gui/launcher.py``, which
stays at ``distloop.gui.launcher``) asks it whether Qt can load before loading it.
"""
