"""The only modules that import TensorFlow: model, data, strategy, the guide's loop.

They load in engine processes alone; everything above ``distloop.engine.tf`` stays
TensorFlow-free so the window and the CLI start in a second (an import-linter
contract in pyproject.toml holds the line)."""
