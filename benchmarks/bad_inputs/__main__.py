"""``python benchmarks/bad_inputs``: every bad input, then the counts by outcome."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a folder, the package is found beside it

from bad_inputs import main  # noqa: E402

main()
