"""A BLINK-style builder living outside perceptforge: which half of the photo is brighter."""

import numpy as np

from perceptforge.plugin import Built, answers


@answers("the brighter half", opposite=["darker", "dimmer"])
def brighter_half(t, sources, ctx, style):
    grey = np.asarray(sources[0].image.convert("L"), np.float64)
    half = grey.shape[1] // 2
    left, right = grey[:, :half].mean(), grey[:, half:].mean()
    # a ValueError refuses this draw (the unit is quarantined with the reason): too close to call
    if abs(left - right) < float(t.params.get("min_gap", 1.0)):
        raise ValueError(f"the halves differ by only {abs(left - right):.2f} grey levels")
    return Built([sources[0].image], ["the left half", "the right half"], 0 if left > right else 1)
