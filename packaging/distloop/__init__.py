"""Distloop as one installed namespace: distloop.engine, distloop.gui, distloop.resources.

The repository keeps ``engine/``, ``gui/`` and ``resources/`` at its top level;
``pyproject.toml`` maps them under this package (setuptools ``package-dir``), so
the wheel owns a single top-level name and a user's own ``engine.py`` beside
their step code is never shadowed. This file lives in ``packaging/`` rather than
in a ``distloop/`` folder at the root because such a folder, first on
``sys.path`` when Python starts in the repository, would hide the mapped
subpackages.
"""

from .engine import __version__

__all__ = ["__version__"]
