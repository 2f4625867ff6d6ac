"""Visual prompts: drawn where the record says, never over the marked point, never off the image, never
overlapping; sizes scale with the image as in BLINK (10 px at 1024 px height)."""

import numpy as np
import pytest
from PIL import Image

from perceptforge.logic.marks import (
    Mark,
    MarkPlacementError,
    MarkStyle,
    draw_marks,
    ring_radius,
    scaled,
)

GREY = (120, 120, 120)


def canvas(w=512, h=512, colour=GREY):
    return Image.new("RGB", (w, h), colour)


def changed(before, after):
    return np.any(np.asarray(before) != np.asarray(after), axis=2)


def test_sizes_scale_with_the_image_height():
    assert scaled(10, 1024) == 10 and scaled(10, 512) == 5 and scaled(15, 2048) == 30
    assert ring_radius(MarkStyle(radius=5), 1024) == 6.0  # never so small that the ring covers the point


def test_circles_are_drawn_around_their_points_and_leave_the_points_visible():
    image = canvas()
    out, placed = draw_marks(image, [Mark("A", (100, 200)), Mark("B", (400, 300))], MarkStyle())
    diff = changed(image, out)
    for (x, y), p in zip([(100, 200), (400, 300)], placed):
        assert p.centre == (x, y)
        assert not diff[y, x]  # the marked point is not covered
        r = p.radius
        ring = [(round(x + r * np.cos(a)) - 1, round(y + r * np.sin(a))) for a in np.linspace(0, 2 * np.pi, 16)]
        assert sum(diff[yy, xx] for xx, yy in ring) >= 12  # ink on the ring around it
        assert tuple(np.asarray(out)[y, round(x - r + 1)]) == (255, 0, 0)  # the ring is red
    # every changed pixel belongs to a mark or a label
    ys, xs = np.nonzero(diff)
    assert all(
        any(b[0] - 1 <= x <= b[2] + 1 and b[1] - 1 <= y <= b[3] + 1 for p in placed for b in (p.bounds, p.label_box))
        for x, y in zip(xs, ys)
    )


def test_labels_sit_beside_their_marks_inside_the_image():
    image = canvas(300, 200)
    _, placed = draw_marks(image, [Mark("A", (292, 100)), Mark("B", (20, 20))], MarkStyle(radius=20))
    for p in placed:
        x0, y0, x1, y1 = p.label_box
        assert 0 <= x0 and 0 <= y0 and x1 <= 300 and y1 <= 200
        assert not (x0 < p.bounds[2] and p.bounds[0] < x1 and y0 < p.bounds[3] and p.bounds[1] < y1)
    assert placed[0].label_box[2] <= placed[0].bounds[0]  # no room on the right at the edge: the label goes left


def test_marks_that_would_leave_the_image_or_overlap_are_refused():
    with pytest.raises(MarkPlacementError, match="would leave"):
        draw_marks(canvas(), [Mark("A", (3, 250))], MarkStyle())
    with pytest.raises(MarkPlacementError, match="marks A and B overlap"):
        draw_marks(canvas(), [Mark("A", (200, 200)), Mark("B", (205, 203))], MarkStyle())
    with pytest.raises(MarkPlacementError, match="overlap"):
        draw_marks(
            canvas(), [Mark("A", box=(10, 10, 100, 100)), Mark("B", box=(90, 90, 200, 200))], MarkStyle(shape="box")
        )


def test_ink_has_a_halo_that_contrasts_with_the_background():
    for background, halo in (((250, 250, 250), (0, 0, 0)), ((10, 10, 10), (255, 255, 255))):
        image = canvas(colour=background)
        out, (p,) = draw_marks(image, [Mark("A", (256, 256))], MarkStyle())
        pixels = {tuple(v) for v in np.asarray(out).reshape(-1, 3)}
        assert halo in pixels and (255, 0, 0) in pixels


def test_box_marks():
    image = canvas()
    out, (p,) = draw_marks(image, [Mark("A", box=(50, 60, 200, 220))], MarkStyle(shape="box"))
    assert tuple(np.asarray(out)[60, 120]) == (255, 0, 0) and not changed(image, out)[140, 120]


def test_labels_are_legible_on_a_small_image():
    """Issue 28: scaled from 1024 px, labels were 6 px tall on a 384×303 image. Whatever the image's size, a
    label's ink (outline included) is at least MIN_LABEL_PX tall."""
    from perceptforge.logic.marks import MIN_LABEL_PX

    for height in (120, 303, 512):
        image = canvas(384, height)
        _, placed = draw_marks(image, [Mark("A", (100, height // 2)), Mark("B", (300, height // 2))], MarkStyle())
        for p in placed:
            assert p.label_box[3] - p.label_box[1] >= MIN_LABEL_PX
    # at BLINK's own size the template's font is kept (it is larger than the floor)
    _, (big,) = draw_marks(canvas(1024, 1024), [Mark("A", (500, 500))], MarkStyle())
    assert big.label_box[3] - big.label_box[1] > MIN_LABEL_PX


def test_box_labels_sit_outside_both_overlapping_boxes_or_the_draw_is_refused():
    """Issue 28: in 4 localization items a box's label sat inside the other box (where it reads as that box's).
    Labels of overlapping boxes go outside both, nearer their own; with no such place the draw is refused."""
    from perceptforge.logic.marks import distance

    boxes = [Mark("A", box=(40, 40, 200, 200)), Mark("B", box=(90, 70, 260, 230))]
    _, placed = draw_marks(canvas(400, 300), boxes, MarkStyle(shape="box"), allow_overlap=True)
    for p in placed:
        other = next(q for q in placed if q is not p)
        assert not any(
            p.label_box[0] < b[2] and b[0] < p.label_box[2] and p.label_box[1] < b[3] and b[1] < p.label_box[3]
            for b in (p.bounds, other.bounds)
        )
        assert distance(p.label_box, p.bounds) < distance(p.label_box, other.bounds)
    # both boxes fill the image: nowhere outside them for a label
    full = [Mark("A", box=(0, 0, 400, 300)), Mark("B", box=(0, 0, 380, 300))]
    with pytest.raises(MarkPlacementError, match="outside every mark"):
        draw_marks(canvas(400, 300), full, MarkStyle(shape="box"), allow_overlap=True)
