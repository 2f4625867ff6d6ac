"""perceptforge's worked extension example (see the README beside pyproject.toml's comments)."""
