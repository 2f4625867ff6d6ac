import pytest

from perceptforge.data import geometry as g


def test_norm_round_trip_exact_for_decimal_boxes():
    # Shikra prints three decimals; 0.125 of 640 is exactly 80.
    assert g.norm_to_xyxy([0.125, 0.25, 0.5, 0.75], 640, 480) == (80.0, 120.0, 320.0, 360.0)
    # 0.1 is not exact in binary; the decimal reading still gives exactly 64, not 64.00000000000001.
    assert g.norm_to_xyxy([0.1, 0.3, 0.7, 0.9], 640, 480) == (64.0, 144.0, 448.0, 432.0)
    assert g.xyxy_to_norm((64, 144, 448, 432), 640, 480) == (0.1, 0.3, 0.7, 0.9)


def test_grid1000():
    assert g.grid1000_to_xyxy([100, 250, 500, 1000], 640, 480) == (64.0, 120.0, 320.0, 480.0)


def test_label_studio_percent_round_trip():
    value = g.xyxy_to_ls_percent((20, 15, 370, 512), 512, 512)
    assert value == {"x": 3.90625, "y": 2.9296875, "width": 68.359375, "height": 97.0703125}
    assert g.ls_percent_to_xyxy(value, 512, 512) == (20.0, 15.0, 370.0, 512.0)
    # Non-power-of-two sizes: round trip to within float precision.
    back = g.ls_percent_to_xyxy(g.xyxy_to_ls_percent((10, 20, 333, 401), 451, 600), 451, 600)
    assert back == pytest.approx((10, 20, 333, 401), abs=1e-9)


def test_xywh():
    assert g.xywh_to_xyxy([10, 20, 30, 40]) == (10.0, 20.0, 40.0, 60.0)
    assert g.xyxy_to_xywh((10, 20, 40, 60)) == (10.0, 20.0, 30.0, 40.0)


@pytest.mark.parametrize(
    "box, message",
    [
        ([1, 2, 3], "4 numbers"),
        ([5, 5, 5, 9], "empty box"),
        ([5, 9, 8, 2], "empty box"),
        ([float("nan"), 0, 1, 1], "NaN"),
    ],
)
def test_bad_boxes(box, message):
    with pytest.raises(ValueError, match=message):
        g.check_xyxy(box)


def test_bad_norm_and_percent():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        g.norm_to_xyxy([0.1, 0.2, 1.5, 0.9], 100, 100)
    with pytest.raises(ValueError, match="size must be positive"):
        g.xyxy_to_norm((0, 0, 1, 1), 0, 10)
    with pytest.raises(ValueError, match="rotated"):
        g.ls_percent_to_xyxy({"x": 1, "y": 1, "width": 2, "height": 2, "rotation": 30}, 10, 10)
    with pytest.raises(ValueError, match="lacks"):
        g.ls_percent_to_xyxy({"x": 1, "y": 1}, 10, 10)


def test_clip():
    assert g.clip_xyxy((-5, -5, 5, 5), 4, 4) == (0.0, 0.0, 4.0, 4.0)
    with pytest.raises(ValueError, match="outside"):
        g.clip_xyxy((10, 10, 20, 20), 4, 4)
