from perceptforge.cli.main import app

__all__ = ["app"]
