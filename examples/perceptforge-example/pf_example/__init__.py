"""perceptforge's worked extension example (docs/extending.md walks through it)."""
