"""A plain backdrop beside a subject annotated with a box only: a studio's paper or cloth, one colour or a smooth
gradient. Where the backdrop is plain, the photo says what is backdrop and what is not: past the cut, a lock of hair
that stands clearly off it is the subject (a curl the segmenter's coarse map cut off: its strands 15–45 ΔE off a
backdrop that varies by 1–3); inside the cut, what is its colour is the backdrop, seen through the subject (the
outer corner of a lens), which a new scene must show too.

The backdrop is learnt from the pixels well outside the cut, as a smooth field (a normalised Gaussian blur of their
colours) carried a little way under the subject; where its own pixels stray from that field (a window, a flag's
folds, a painting) it is not plain, and nothing here changes the cut. Only the mask changes: the matte along its
outline (``logic/matting``) is the same as on any photo. NumPy and OpenCV on arrays, tested on small drawn images.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import cv2
import numpy as np

from perceptforge.logic.body_mask import disc_kernel, joined, lab_of, nearer

LEARN_FROM = 0.02  # the backdrop is learnt this far or farther outside the cut, as a share of the longer side
SMOOTH = 0.03  # the smooth field's Gaussian sigma, as a share of the longer side
PLAIN = 3.0  # ΔE: the backdrop's mean stray from its smooth field under which it is plain
PLAIN_SHARE = 0.95  # the share of the backdrop that must be plain for any of it to be taken as plain
STRAND_REACH = 0.08  # how far past the cut a strand is looked for, as a share of the longer side
POCKET_REACH = 0.05  # how far inside the cut the backdrop is looked for
OFF = 10.0  # ΔE off the first smooth field from which a pixel well outside the cut is not learnt as the backdrop
LOCK = 20.0  # ΔE off the backdrop (and at least STRAY × its local stray) from which a pixel past the cut is a lock's
STRAY = 4.0
LOCK_PX = 3  # the least width, in pixels, of a strand that is kept
MATTED = 0.012  # past the cut, the band the matte weighs (``logic/matting``'s 0.8% and a margin), a share of the side
POCKET = 6.0  # ΔE: a kept pixel this near the backdrop, and FAR × as far from the subject beside it, is the backdrop
FAR = 3.0
GAP = 15.0  # ΔE: among hair strands, a kept pixel this near the backdrop, and nearer it than any of the hair's colours
GRID_PX = 4.0  # a smooth field is blurred on a grid this many cells to its sigma
POCKET_PX = 4  # a pocket's least area in pixels (a fleck between locks; a pixel or three is noise)


@dataclass(frozen=True)
class Backdrop:
    """The smooth field of the backdrop's colour (H, W, 3) CIELAB, how far each pixel's colour is off it (H, W) ΔE
    (0 where it has none), how far its own pixels stray from it about each pixel (H, W) ΔE, and where it was learnt
    (H, W) bool."""

    colour: np.ndarray
    off: np.ndarray
    stray: np.ndarray
    learnt: np.ndarray
    kept_share: float = 1.0  # the share of the pixels well outside the cut that it was learnt from

    @cached_property
    def plain(self) -> np.ndarray:
        """(H, W) bool: where the backdrop about a pixel is plain; nowhere unless nearly all of it is (a studio's),
        for the smooth dark reaches of a painting are plain too, and a gold leaf of it beside an ear is no curl."""
        plain = self.stray < PLAIN
        if not self.learnt.any() or min(self.kept_share, plain[self.learnt].mean()) < PLAIN_SHARE:
            return np.zeros(plain.shape, bool)
        return plain


def _blurred(values: np.ndarray, where: np.ndarray, sigma: float) -> np.ndarray:
    """Each pixel's nearby average of ``values`` over ``where`` (a normalised Gaussian blur); NaN where none is.
    Blurred on a grid ``GRID_PX`` / ``sigma`` as fine (a smooth field needs no finer one: 5× faster on a portrait)."""
    h, w = where.shape
    mask: np.ndarray = where.astype(np.float32)
    total: np.ndarray = values.astype(np.float32) * (mask[..., None] if values.ndim == 3 else mask)
    scale = min(1.0, GRID_PX / sigma)
    if scale < 1:
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        total, mask = (cv2.resize(a, size, interpolation=cv2.INTER_AREA) for a in (total, mask))
    total, mask = (cv2.GaussianBlur(a, (0, 0), sigma * scale) for a in (total, mask))
    if scale < 1:
        total, mask = (cv2.resize(a, (w, h), interpolation=cv2.INTER_LINEAR) for a in (total, mask))
    weight = mask[..., None] if values.ndim == 3 else mask
    return np.where(weight > 1e-6, total / np.maximum(weight, 1e-6), np.nan).astype(np.float64)


def learnt(lab: np.ndarray, keep: np.ndarray) -> Backdrop:
    """The backdrop beside the kept subject, learnt from the pixels ``LEARN_FROM`` or farther outside its cut."""
    long_side = max(keep.shape)
    far = ~cv2.dilate(keep.astype(np.uint8), disc_kernel(max(1, round(LEARN_FROM * long_side)))).astype(bool)
    sigma = max(1.0, SMOOTH * long_side)
    colour = _blurred(lab.astype(np.float64), far, sigma)
    # a curl reaching far past the cut is not the backdrop: learnt again without what stands off the first field
    # (a window's or a painting's detail is not: learnt without it, what was left was plain, and is only a share)
    outside = far.sum()
    far &= ~(np.linalg.norm(lab - colour, axis=-1) >= OFF)
    colour = _blurred(lab.astype(np.float64), far, sigma)
    off = np.where(np.isnan(colour[..., 0]), 0.0, np.linalg.norm(lab - np.nan_to_num(colour), axis=-1))
    stray = _blurred(np.where(far, off, 0.0), far, sigma)
    stray = np.where(np.isnan(stray), np.inf, stray)
    return Backdrop(colour, off, stray, far, float(far.sum() / max(1, outside)))


def strands(lab: np.ndarray, keep: np.ndarray, backdrop: Backdrop) -> np.ndarray:
    """(H, W) bool: locks past the cut where the backdrop is plain: pixels clearly not it (``LOCK`` ΔE off it, and
    ``STRAY`` × its stray), in pieces at least ``LOCK_PX`` thick that reach past the matte's band (``MATTED``) and
    end within ``STRAND_REACH`` of the cut, with the pixels that tie them to the kept subject."""
    long_side = max(keep.shape)
    reach = max(1, round(STRAND_REACH * long_side))
    near = cv2.dilate(keep.astype(np.uint8), disc_kernel(reach)).astype(bool) & ~keep
    off = backdrop.off
    found = near & backdrop.plain & (off >= np.maximum(LOCK, STRAY * backdrop.stray))
    # the mixed pixels just past the cut are the matte's to weigh: only what reaches past its band (a curl) is
    # added, with the pixels that tie it to the subject
    band = max(1, round(MATTED * long_side))
    away = cv2.distanceTransform((~keep).astype(np.uint8), cv2.DIST_L2, 3)
    past = away > band
    # and only as thick as a lock (a wisp a hair or two wide is half backdrop: kept whole, it was a rim of it)
    thick = cv2.morphologyEx((found & past).astype(np.uint8), cv2.MORPH_OPEN, disc_kernel(LOCK_PX // 2)).astype(bool)
    locks = cv2.dilate(thick.astype(np.uint8), disc_kernel(1)).astype(bool) & found & past
    # that ends within the reach: what runs on past it (wisps to the frame's edge) is no lock, and cut at the
    # reach it was a grey blot with a round edge
    count, labels = cv2.connectedComponents(locks.astype(np.uint8), connectivity=8)
    endless = np.unique(labels[locks & (away >= reach - 1)])
    locks &= ~np.isin(labels, endless[endless > 0])
    out = joined(keep | (found & ~past), locks)
    tie = found & ~past & cv2.dilate(out.astype(np.uint8), disc_kernel(band + 1)).astype(bool)
    return joined(keep, out | tie)


def _near_cut(keep: np.ndarray) -> tuple[np.ndarray, int]:
    """The kept pixels within ``POCKET_REACH`` of the cut, and that reach in pixels."""
    reach = max(1, round(POCKET_REACH * max(keep.shape)))
    return keep & ~cv2.erode(keep.astype(np.uint8), disc_kernel(reach)).astype(bool), reach


def seen(lab: np.ndarray, keep: np.ndarray, backdrop: Backdrop) -> np.ndarray:
    """(H, W) bool: kept pixels within ``POCKET_REACH`` of the cut, where the backdrop is plain, whose colour is the
    backdrop's (within ``POCKET`` ΔE) and ``FAR`` × as far from the subject beside them (the kept pixels that are
    not the backdrop's colour, within the reach): the backdrop seen through the subject."""
    inside, reach = _near_cut(keep)
    off = backdrop.off
    like = inside & backdrop.plain & (off < POCKET)
    subject = _blurred(lab.astype(np.float64), keep & (off >= FAR * POCKET), float(reach))
    to_subject = np.where(np.isnan(subject[..., 0]), np.inf, np.linalg.norm(lab - np.nan_to_num(subject), axis=-1))
    return like & (to_subject >= FAR * off)


def gaps(lab: np.ndarray, keep: np.ndarray, backdrop: Backdrop, hair: np.ndarray) -> np.ndarray:
    """(H, W) bool: kept pixels in ``hair`` within ``POCKET_REACH`` of the cut, where the backdrop is plain, within
    ``GAP`` ΔE of it and clearly nearer it than any of the kept hair's own colours (its colour centres, not their
    mean: a dark head's pale highlights are one of them): the backdrop seen between locks, half mixed with them. Red
    curls' gaps 3-6 px in stayed pale grey-blue specks over the new scene; a limit on the distance to the hair's mean
    took 5-S1's pale highlight strands for gaps."""
    inside, _ = _near_cut(keep)
    like = inside & hair & backdrop.plain & (backdrop.off < GAP)
    return nearer(lab, like, backdrop.learnt, keep & hair & (backdrop.off >= GAP))


def pockets(lab: np.ndarray, keep: np.ndarray, backdrop: Backdrop, protect: np.ndarray | None = None) -> np.ndarray:
    """(H, W) bool: the kept pixels that are the backdrop (``seen``), in pieces of at least ``POCKET_PX`` (a lens's
    corner, a fleck of it between a curl's locks; not a stray pixel) and out to where they are twice as far off it;
    never in ``protect``."""
    found = seen(lab, keep, backdrop)
    if protect is not None:
        found &= ~protect
    # not only pieces a 3×3 opening leaves: the matte weighs the cut's own edge only, and a fleck between locks 4-5 px
    # in stayed, a grey-blue speck in red hair over the new scene
    count, labels, stats, _ = cv2.connectedComponentsWithStats(found.astype(np.uint8), connectivity=8)
    big = np.isin(labels, [k for k in range(1, count) if stats[k, cv2.CC_STAT_AREA] >= POCKET_PX])
    # out to where the lens tints it (twice as far off): a pocket cut at the strict line kept a lavender rim
    loose = keep & backdrop.plain & (backdrop.off < 2 * POCKET)
    if protect is not None:
        loose &= ~protect
    return joined(big, loose) | big


def see_through(
    image: np.ndarray, keep: np.ndarray, protect: np.ndarray | None = None, hair: np.ndarray | None = None
) -> np.ndarray:
    """``keep`` with the subject's strands past the cut added and the backdrop's pockets inside it taken out, where
    the backdrop beside it is plain (``strands``, ``pockets``), and its gaps between locks where the outline is
    ``hair`` (``gaps``); as it is elsewhere."""
    lab = lab_of(image)
    backdrop = learnt(lab, keep)
    if not backdrop.plain.any():
        return keep
    grown = keep | strands(lab, keep, backdrop)
    gone = pockets(lab, grown, backdrop, protect)
    if hair is not None:
        gone |= gaps(lab, grown, backdrop, hair if protect is None else hair & ~protect)
    return grown & ~gone
