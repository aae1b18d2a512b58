"""The window's frame, the top of ``gui/``: the app's start and the main window.

``app.py`` starts the QApplication with asyncio in its event loop (``interrupts.py``
answers Ctrl-C there); ``main_window.py`` builds the layout, actions and menus and wires
the project document, the run starter and controller, the queue, the runs and the
studies to the views; ``focus_return.py`` puts the focus back in its field after a
dialog and ``help_windows.py`` shows the shortcuts and the guide. What the feature
folders share (settings, dialogs) is below them all, in ``gui/common/``.
``system_libraries.py`` is Qt-free: the ``distloop`` command (``gui/launcher.py``, which
stays at ``distloop.gui.launcher``) asks it whether Qt can load before loading it.
"""
