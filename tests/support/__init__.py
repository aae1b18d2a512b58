"""What the test modules share: projects and run folders, real hosts (sshd in network
namespaces), a real Slurm, fresh Debian roots and the built .deb, the guide's program
written out by hand, and the window's one stand-in for the engine (``gui_fakes``).

Modules here hold no tests; ``tests/conftest.py`` puts ``tests/`` on the import path,
so a test module imports them as ``support.<name>``.
"""
