"""Helpers shared by tests (importable because pytest puts tests/ on the path)."""

import sys


def perceptforge_cmd() -> list[str]:
    return [sys.executable, "-m", "perceptforge.cli"]
