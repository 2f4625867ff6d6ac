import pytest

from perceptforge.logic.boxes import parse_boxes, parse_subject_reply


def xyxy(parsed):
    return [(p.phrase, p.box.xyxy) for p in parsed]


def test_shikra_normalised_boxes():
    boxes, problems = parse_boxes("A dog [0.120,0.300,0.580,0.910] chases a ball [0.6,0.7,0.7,0.8].", 640, 480)
    assert xyxy(boxes) == [("A dog", (76.8, 144.0, 371.2, 436.8)), ("chases a ball", (384.0, 336.0, 448.0, 384.0))]
    assert problems == []


def test_shikra_several_boxes_for_one_phrase():
    boxes, _ = parse_boxes("two men [0.1,0.1,0.2,0.2;0.5,0.5,0.6,0.6]", 100, 100)
    assert [b.box.xyxy for b in boxes] == [(10.0, 10.0, 20.0, 20.0), (50.0, 50.0, 60.0, 60.0)]


def test_qwen_grid_boxes():
    text = "<|object_ref_start|>the woman<|object_ref_end|><|box_start|>(100,250),(500,1000)<|box_end|> stands"
    boxes, _ = parse_boxes(text, 640, 480)
    assert xyxy(boxes) == [("the woman", (64.0, 120.0, 320.0, 480.0))]


def test_pixel_boxes_and_explicit_format():
    boxes, _ = parse_boxes("helmet [275, 345, 505, 512]", 512, 512)
    assert boxes[0].box.xyxy == (275.0, 345.0, 505.0, 512.0)
    # With an explicit format, numbers in [0, 1] are not reread as normalised.
    boxes, _ = parse_boxes("dot [0, 0, 1, 1]", 10, 10, fmt="pixel")
    assert boxes[0].box.xyxy == (0.0, 0.0, 1.0, 1.0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        None,
        "no boxes here",
        "[1, 2, 3]",
        "[0.5,0.5,0.2,0.9]",
        "[600, 10, 700, 20]",
        "<|box_start|>(10,20)<|box_end|>",
        "[a,b,c,d]",
    ],
)
def test_garbage_gives_no_box(text):
    boxes, _ = parse_boxes(text, 512, 512)
    assert boxes == []


def test_problems_are_reported():
    _, problems = parse_boxes("x [0.5,0.5,0.2,0.9] y [600, 10, 700, 20]", 512, 512)
    assert len(problems) == 2 and "empty box" in problems[0] and "outside" in problems[1]


def test_subject_reply():
    subject, box = parse_subject_reply("### woman ### [0.125,0.25,0.5,1.000] ###", 512, 512)
    assert (subject, box.xyxy) == ("woman", (64.0, 128.0, 256.0, 512.0))
    subject, box = parse_subject_reply("Sure! ### the astronaut ### [20, 15, 370, 512] ###", 512, 512)
    assert subject == "the astronaut" and box.xyxy == (20.0, 15.0, 370.0, 512.0)
    with pytest.raises(ValueError, match="expected '### main subject"):
        parse_subject_reply("The main subject is a woman.", 512, 512)
    with pytest.raises(ValueError, match="no usable box"):
        parse_subject_reply("### woman ### [0.5, 0.9, 0.4, 0.1] ###", 512, 512)
