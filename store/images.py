"""Reading images safely: EXIF rotation applied, any mode converted to RGB, clear errors."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from perceptforge.errors import InputError


def load_rgb(path: str | Path, max_pixels: int | None = None) -> Image.Image:
    """Open an image as upright RGB (grayscale, palette, CMYK, RGBA and 16-bit inputs converted). With
    ``max_pixels``, a larger image is refused from its header, before a byte of pixels is decoded."""
    path = Path(path)
    try:
        with Image.open(path) as im:
            if max_pixels is not None and im.width * im.height > max_pixels:
                raise InputError(
                    str(path),
                    f"{im.width}x{im.height} is {im.width * im.height / 1e6:.1f} MP, above the profile's "
                    f"ingest.max_pixels ({max_pixels / 1e6:.1f} MP)",
                )
            im.load()
            upright = ImageOps.exif_transpose(im)
    except FileNotFoundError:
        raise InputError(str(path), "image file not found") from None
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise InputError(str(path), f"cannot decode image: {exc}") from None
    if upright.mode == "RGBA" or (upright.mode == "P" and "transparency" in upright.info):
        # Transparent pixels become white, not black, as a viewer would show them.
        rgba = upright.convert("RGBA")
        canvas = Image.new("RGB", rgba.size, (255, 255, 255))
        canvas.paste(rgba, mask=rgba.getchannel("A"))
        return canvas
    if upright.mode in ("I;16", "I;16B", "I;16L", "I"):
        arr = np.asarray(upright, dtype=np.float64)
        arr = 255 * (arr - arr.min()) / max(arr.max() - arr.min(), 1)
        return Image.fromarray(arr.astype(np.uint8)).convert("RGB")
    return upright.convert("RGB")


def png_bytes(image: Image.Image) -> bytes:
    """Deterministic PNG encoding (no timestamps or text chunks): same pixels → same bytes."""
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=False, compress_level=6)
    return buf.getvalue()
