"""Data files shipped with Distloop (example projects, icons, screenshots).

A package only so that ``importlib.resources`` finds the files in every kind of
install: a source checkout, a wheel, and the frozen bundle.
"""
