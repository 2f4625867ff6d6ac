"""Background edits keep what is the subject: its face, its body, what it holds, even when it touches the edge."""

import numpy as np

from perceptforge.backends.segmenters import GrabCutSegmenter
from perceptforge.data.schema import Box, Grounding, Region
from perceptforge.logic.edit_region import Hints, protected_regions, subject_hints


def grounding(**attributes: str) -> Grounding:
    return Grounding(
        source_id="s",
        caption="A person.",
        subject=Region(label="man", box=Box(x0=40, y0=20, x1=100, y1=100), role="subject"),
        regions=[
            Region(label="face", box=Box(x0=60, y0=20, x1=80, y1=40), role="face"),
            Region(label="camera", box=Box(x0=10, y0=50, x1=30, y1=70)),
            Region(label="flag", box=Box(x0=0, y0=0, x1=30, y1=40)),
        ],
        attributes=attributes,
        backend="annotations",
    )


def test_protected_regions_are_the_face_middle_the_body_below_it_and_what_is_held():
    regions = protected_regions(grounding(held_object="a camera"))
    assert regions["face"] == (65.0, 25.0, 75.0, 35.0)
    assert regions["body"] == (65.0, 45.0, 75.0, 100.0)  # as wide as half the face, from below it to the box's end
    assert regions["camera"] == (15.0, 55.0, 25.0, 65.0)
    assert "camera" not in protected_regions(grounding(held_object="nothing"))
    hints = subject_hints(grounding(held_object="a camera"), "a flag")
    # the held camera is segmented on its own, not seeded as a box; the flag is probably background
    assert hints.inside == (regions["face"], regions["body"]) and hints.outside == ((0.0, 0.0, 30.0, 40.0),)
    assert hints.extent == (40.0, 20.0, 100.0, 100.0)


def test_a_subject_touching_the_image_edge_is_kept_when_the_jittered_box_stops_short_of_it():
    rng = np.random.default_rng(0)
    image = rng.normal(150, 12, (100, 100, 3)).clip(0, 255).astype(np.uint8)  # a grey, grainy backdrop
    image[30:, 55:] = (230, 110, 40)  # an orange figure cut by the right and bottom edges
    image[30:45, 65:85] = (200, 160, 130)  # its face
    subject = (55.0, 30.0, 100.0, 100.0)
    jittered = (50.0, 25.0, 92.0, 90.0)  # Eq. 1's jitter moved the box up and left
    hints = Hints(inside=((70.0, 34.0, 80.0, 41.0),), extent=subject)
    kept = GrabCutSegmenter(iterations=5).hinted_candidates(image, jittered, hints)[0]
    figure = np.zeros((100, 100), bool)
    figure[30:, 55:] = True
    assert (kept & figure).sum() / figure.sum() > 0.95  # the strip beyond the jittered box is the figure too
    assert (kept & ~figure).sum() / (~figure).sum() < 0.05
    unhinted = GrabCutSegmenter(iterations=5).hinted_candidates(image, jittered, Hints(inside=hints.inside))[0]
    assert (unhinted & figure).sum() / figure.sum() < 0.95  # without the extent, the edge strip is lost
