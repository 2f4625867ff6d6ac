"""``python -m perceptforge.cli`` and the ``perceptforge`` console script."""

import sys


def main() -> None:
    if sys.argv[1:2] == ["score"]:
        # Scoring starts with its own command alone: the whole application imports every family's flows
        # (numpy, pydantic models, …), a third of a second that scoring never uses.
        from perceptforge.cli.app import new_app
        from perceptforge.cli.score import score

        scoring = new_app("perceptforge score")
        scoring.callback()(lambda: None)  # a group, so that "score" stays a subcommand as in the whole app
        scoring.command()(score)
        scoring(prog_name="perceptforge")
    else:
        from perceptforge.cli.main import app

        app(prog_name="perceptforge")


if __name__ == "__main__":
    main()
