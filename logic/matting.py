"""A soft edge for a cut-out subject: closed-form matting (Levin, Lischinski and Weiss, "A Closed-Form Solution
to Natural Image Matting", PAMI 2008) in a band along a hard mask's outline, and the subject's own colours there.

A hard mask pasted on a new scene keeps a rim of the old background around hair and shoulders (a halo a person
sees at once) or bites into the subject. Here the outline's band is unknown, what lies well inside and well
outside is known, and the alpha of the band follows the image's local colour lines. Where alpha is partial,
the subject's colour is recovered from the pixel, less the old background's share, so the old scene does not
shine through the new one.
"""

from __future__ import annotations

import cv2
import numpy as np
from scipy import sparse
from scipy.sparse.linalg import spsolve

# a rim pixel's recovered colour is held within this many standard deviations of the subject's colours near it
SPREAD_SD = 2.0
# below the first ΔE between the subject's and the background's colours the matte gives way to the cut's edge,
# wholly; above the second it stands
SEPARATION_DE = (12.0, 24.0)
# hair whose strands lie this far (L*) from the old backdrop's lightness behind them is unmixed by lightness
STRAND_GAP_L = 20.0
# where colour cannot place a hair outline, its cut edge is softened this far (a Gaussian's sigma, in pixels), where
# the subject beside it is this many times as textured as the backdrop (strands, not a cap's white band)
HAIR_SOFT, STRANDS_OVER = 2.5, 2.5
TEXTURE_HALF = 4  # half the window ``texture`` measures over
PART_LEVELS = 32  # the subject's parts by lightness a rim pixel's colour is taken from, this many grey levels wide


def downscaled(image: np.ndarray, max_side: int) -> tuple[np.ndarray, float]:
    """``image`` scaled (INTER_AREA) so that its longer side is at most ``max_side``, and the scale; the image
    itself when it is small enough. Segmentation and matting cost grows with pixels."""
    h, w = image.shape[:2]
    scale = min(1.0, max_side / max(h, w))
    if scale == 1:
        return image, scale
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA), scale


def trimap(keep: np.ndarray, band_px: int, hard_thin: bool = False) -> np.ndarray:
    """(H, W) float: 1 surely subject, 0 surely background, 0.5 unknown (``band_px`` on either side of the
    outline of ``keep``). A part of ``keep`` narrower than the band (a tripod's leg, a strut) keeps its core,
    all but its one-pixel rim, as sure: with nothing of it known, the matte would fade it into the scene. With
    ``hard_thin`` (a drawn outline) such a part and its surroundings have no unknown band at all."""
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * band_px + 1, 2 * band_px + 1))
    inner = cv2.erode(keep.astype(np.uint8), kernel, borderType=cv2.BORDER_REPLICATE).astype(bool)
    core = thin_core(keep, inner, kernel)
    inner |= core
    outer = cv2.dilate(keep.astype(np.uint8), kernel, borderType=cv2.BORDER_REPLICATE).astype(bool)
    if hard_thin and core.any():
        # a thin piece gives the matte too little of itself to learn its colours from: a dark strut faded into a
        # dark scene, grass as bright as a leg came in as specks. Round it, a drawn line is taken as it is
        reach = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * band_px + 3, 2 * band_px + 3))  # core + its rim
        near = cv2.dilate(core.astype(np.uint8), reach).astype(bool)
        inner |= near & keep
        outer &= ~(near & ~keep)
    # so does a gap of the background narrower than the band (the wedge between a neck and a collar ring)
    outer &= ~thin_core(~keep, ~outer, kernel)
    out = np.full(keep.shape, 0.5, np.float64)
    out[inner] = 1.0
    out[~outer] = 0.0
    return out


def thin_core(part: np.ndarray, sure: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """The pixels of ``part`` in its pieces narrower than ``kernel`` (what the band's erosion left no ``sure``
    pixel of), all but their one-pixel rim."""
    thin = part & ~cv2.dilate(sure.astype(np.uint8), kernel).astype(bool)
    core = cv2.erode(part.astype(np.uint8), np.ones((3, 3), np.uint8), borderType=cv2.BORDER_REPLICATE)
    return thin & core.astype(bool)


def closed_form_alpha(image: np.ndarray, tri: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Alpha in [0, 1] for the unknown pixels of ``tri`` (0.5) from the matting Laplacian over 3×3 windows;
    known pixels keep their value. ``image`` is (H, W, 3) uint8 RGB."""
    h, w = tri.shape
    img = image.astype(np.float64) / 255.0
    unknown = tri == 0.5
    if not unknown.any():
        return tri.copy()
    # only the windows that touch an unknown pixel add to the unknowns' equations
    centres = cv2.dilate(unknown.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    centres[[0, -1], :] = False
    centres[:, [0, -1]] = False
    cy, cx = np.nonzero(centres)
    offsets = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    idx = np.stack([(cy + dy) * w + (cx + dx) for dy, dx in offsets], axis=1)  # (K, 9) pixel indices
    colours = img.reshape(-1, 3)[idx]  # (K, 9, 3)
    mean = colours.mean(axis=1, keepdims=True)
    centred = colours - mean
    cov = np.einsum("kni,knj->kij", centred, centred) / 9 + (eps / 9) * np.eye(3)
    inv = np.linalg.inv(cov)
    values = (1 + np.einsum("kni,kij,kmj->knm", centred, inv, centred)) / 9  # (K, 9, 9)
    rows = np.repeat(idx, 9, axis=1).ravel()
    cols = np.tile(idx, (1, 9)).ravel()
    affinity = sparse.csr_matrix((values.ravel(), (rows, cols)), shape=(h * w, h * w))
    laplacian = sparse.diags(np.asarray(affinity.sum(axis=1)).ravel()) - affinity
    flat = tri.ravel().copy()
    u = np.flatnonzero(unknown.ravel())
    k = np.flatnonzero(~unknown.ravel())
    system = laplacian[u][:, u].tocsc()
    rhs = -(laplacian[u][:, k] @ flat[k])
    # a tiny ridge keeps pixels that no window ties to a known one (a closed ring of unknowns) solvable
    flat[u] = spsolve(system + 1e-8 * sparse.identity(len(u), format="csc"), rhs + 1e-8 * 0.5)
    return np.clip(flat.reshape(h, w), 0.0, 1.0)


def spread(values: np.ndarray, where: np.ndarray, sigma: float) -> np.ndarray:
    """Each pixel's nearby average of ``values`` ((H, W) or (H, W, C), float) over ``where`` (a normalised Gaussian
    blur), in the values' own precision."""
    weight = cv2.GaussianBlur(where.astype(values.dtype), (0, 0), sigma)
    if values.ndim == 3:
        return cv2.GaussianBlur(values * where[..., None], (0, 0), sigma) / np.maximum(weight, 1e-6)[..., None]
    return cv2.GaussianBlur(values * where, (0, 0), sigma) / np.maximum(weight, values.dtype.type(1e-6))


def foreground_colours(image: np.ndarray, alpha: np.ndarray, band_px: int, common: bool = False) -> np.ndarray:
    """(H, W, 3) float: the subject's colour at each pixel, the old background's share taken out where alpha is
    partial (I = αF + (1 − α)B, with B the nearby surely-background colour); where alpha is small the pixel says
    little of the subject, and the nearby subject colour stands in. Each channel is held within what the surely
    subject has near the pixel; with ``common``, within what it commonly has (``subject_range``) over twice the
    reach: a segmenter's cut, whose matte can leave a rim pixel further from any sure one."""
    img = image.astype(np.float64)
    sigma = max(1.0, band_px)
    back = spread(img, alpha <= 0.02, 2 * sigma)
    near_fg = spread(img, alpha >= 0.98, 2 * sigma)
    if common:
        near_fg = nearer_part(img, alpha >= 0.98, 2 * sigma, near_fg)
    a = alpha[..., None]
    recovered = (img - (1 - a) * back) / np.maximum(a, 1e-3)
    # from alpha 0.3 (none) to 0.8 (all) the pixel's own colour: a pixel a third subject or less says little of it,
    # and the old backdrop's blurred mean taken out of it over-coloured the rim (an orange line round light-brown
    # hair over a black sky); compared blind with the ramp from 0.1 to 0.5, edges were cleaner in 6 of the 7 new
    # photos' swaps that differed
    trust = np.clip((a - 0.3) / 0.5, 0.0, 1.0)
    fg = trust * recovered + (1 - trust) * near_fg
    # a busy old background (a window behind a jaw) is not its blurred mean: taking that mean out of a pale pocket
    # of it left a colour brighter than any skin nearby, a pale halo over a dark new scene. The subject's colour
    # at its rim is one it has near there
    reach = (4 if common else 2) * max(1, band_px) + 1
    lo, hi = subject_range(img, alpha >= 0.98, reach, SPREAD_SD if common else None)
    held = toward_range(fg, lo, hi) if common else np.clip(fg, lo, hi)
    fg = np.where(np.isfinite(lo), held, fg)
    return np.where(a >= 0.98, img, np.clip(fg, 0, 255))


def nearer_part(img: np.ndarray, sure: np.ndarray, sigma: float, mean: np.ndarray) -> np.ndarray:
    """(H, W, 3): of the ``sure`` subject's parts by lightness (``PART_LEVELS`` grey levels wide), the nearby average
    colour of the part nearest each pixel's own colour; ``mean`` where no part is near. A lapel's dark tip between
    pale skin and a dark backdrop took the blurred mean of the subject near it, the skin's and the shirt's pale: at a
    fifth of alpha, a pale smudge on the new scene where the collar was."""
    grey = img.mean(axis=-1)
    best = mean.copy()
    gap = np.full(grey.shape, np.inf)
    for level in range(0, 256, PART_LEVELS):
        part = sure & (grey >= level) & (grey < level + PART_LEVELS)
        if not part.any():
            continue
        there = cv2.GaussianBlur(part.astype(np.float64), (0, 0), sigma) > 1e-3
        colour = spread(img, part, sigma)
        off = np.where(there, np.linalg.norm(img - colour, axis=-1), np.inf)
        best = np.where((off < gap)[..., None], colour, best)
        gap = np.minimum(gap, off)
    return best


def toward_range(colours: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``colours`` moved straight toward the middle of their [``lo``, ``hi``] box until inside it, not clipped channel
    by channel: a shadowed ear's rim before a dark curtain, its red raised alone to the skin's least, came out a red
    nub no skin has, where moved toward the skin it is a darker skin."""
    finite = np.isfinite(lo) & np.isfinite(hi)
    lo, hi = np.where(finite, lo, colours), np.where(finite, hi, colours)  # no range: the colour is its own
    gap = (lo + hi) / 2 - colours
    step = np.where(np.abs(gap) > 1e-9, gap, 1.0)
    below = np.where(colours < lo, (lo - colours) / step, 0.0)
    above = np.where(colours > hi, (hi - colours) / step, 0.0)
    t = np.clip(np.max(np.maximum(below, above), axis=-1, keepdims=True), 0.0, 1.0)
    return colours + t * gap


def subject_range(
    img: np.ndarray, sure: np.ndarray, size: int, spread_sd: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) of each channel of ``img`` over the ``sure`` pixels within a ``size`` disc of each pixel,
    held with ``spread_sd`` to their mean ± that many standard deviations (Gaussian-weighted over the same reach);
    -inf and inf where there is none."""
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size))
    lo = np.empty(img.shape, np.float64)
    hi = np.empty(img.shape, np.float64)
    for c in range(img.shape[-1]):
        channel = img[..., c].astype(np.float32)
        hi[..., c] = cv2.dilate(np.where(sure, channel, -1.0).astype(np.float32), disc)
        lo[..., c] = -cv2.dilate(np.where(sure, -channel, -256.0).astype(np.float32), disc)
    if spread_sd is not None:
        # the extremes alone let a rim take every channel's brightest at once: a navy shoulder's edge, the red
        # curtain taken out of it, came out a light-blue line over a grey wall, bluer and paler than the jacket
        sigma = size / 2
        mean = spread(img, sure, sigma)
        sd = np.sqrt(np.maximum(spread(img * img, sure, sigma) - mean * mean, 0.0))
        lo = np.maximum(lo, mean - spread_sd * sd)
        hi = np.maximum(lo, np.minimum(hi, mean + spread_sd * sd))
    none = (cv2.dilate(sure.astype(np.uint8), disc) == 0)[..., None]
    return np.where(none, -np.inf, lo), np.where(none, np.inf, hi)


def matte(
    image: np.ndarray,
    keep: np.ndarray,
    band_px: int,
    max_side: int = 768,
    hard_thin: bool = False,
    hair: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(alpha (H, W) float in [0, 1], subject colours (H, W, 3) float) for the subject ``keep`` marks, matted
    ``band_px`` on either side of its outline (``trimap``). The Laplacian is solved on the image scaled to
    ``max_side`` (its cost grows with the band's pixels); the alpha is scaled back and kept at 1 well inside
    ``keep`` and 0 well outside, exactly. ``hair``: (H, W) bool, where the outline is hair (``strand_share``)."""
    h, w = keep.shape
    small, scale = downscaled(image, max_side)
    small_band = max(1, round(band_px * scale))
    small_keep = keep
    if scale < 1:
        size = (small.shape[1], small.shape[0])
        small_keep = cv2.resize(keep.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST).astype(bool)
    alpha = closed_form_alpha(small, trimap(small_keep, small_band, hard_thin))
    if scale < 1:
        alpha = cv2.resize(alpha, (w, h), interpolation=cv2.INTER_LINEAR)
    full = trimap(keep, band_px, hard_thin)
    if not hard_thin:
        # a drawn line is the edge itself, and the cut's softened edge would fade a strut it holds
        alpha = steadied(image, alpha, keep, full, band_px, hair)
    if hair is not None and hair.any():
        # outside the cut the strands' share holds wholly; inside, less and less over the band: held wholly there,
        # a crown's pale grey strands, the window's lightness, were read as window, navy specks in the hair
        depth = cv2.distanceTransform(keep.astype(np.uint8), cv2.DIST_L2, 3)  # 0 outside the cut
        inside = np.clip((depth - 0.5) / band_px, 0.0, 1.0)
        alpha = np.minimum(alpha, np.maximum(strand_share(image, full, band_px, hair), inside))
    alpha = np.where(full == 0.5, alpha, full)
    return alpha, foreground_colours(image, alpha, band_px, common=not hard_thin)


def strand_share(image: np.ndarray, tri: np.ndarray, band_px: int, hair: np.ndarray) -> np.ndarray:
    """(H, W): the most of each unknown pixel of ``tri`` within ``hair`` that can be strands, by its lightness between
    the strands' (the sure subject's near it) and the old backdrop's behind them: (L_back − L) / (L_back − L_hair),
    where those lie ``STRAND_GAP_L`` or more apart; 1 elsewhere. Dark strands before a lit window mix with it
    pixel by pixel, and the matte's colour lines, lost in the window's busy pale and blue, kept such pixels nearly
    whole: a pale blob on the crown over a dark new scene. Lightness alone says how much of the pixel is strand."""
    lightness = cv2.cvtColor(image, cv2.COLOR_RGB2LAB)[..., 0].astype(np.float64) * (100 / 255)
    sigma = 2.0 * max(1, band_px)
    back = spread(lightness, tri == 0, sigma)
    strands = spread(lightness, (tri == 1) & hair, sigma)  # the face's skin beside a temple is no strand
    gap = back - strands
    share = (back - lightness) / np.where(np.abs(gap) > 1e-6, gap, 1.0)
    # a pixel past the backdrop's lightness is no mix of the two: a dark strand at a temple, darker than the curtain
    # behind it, taken for the curtain left a hole the new scene showed through
    share = np.where(share < 0, 1.0, np.minimum(share, 1.0))
    return np.where(hair & (tri == 0.5) & (np.abs(gap) >= STRAND_GAP_L), share, 1.0)


def separation(image: np.ndarray, tri: np.ndarray, band_px: int) -> np.ndarray:
    """(H, W): how far apart (CIE ΔE) the subject's and the old background's colours are near each pixel: their
    averages over the trimap's sure pixels within about the band (over twice it, an ear's rim before a brown head
    behind it was told apart by the face's paler skin, and its soft matte glowed orange; the matte's own alpha is not
    asked which pixels are sure, for where it is unsure it calls tweed the backdrop)."""
    img = image.astype(np.float64)
    sigma = max(1.0, band_px)
    lab = lambda rgb: cv2.cvtColor((np.clip(rgb, 0, 255) / 255).astype(np.float32), cv2.COLOR_RGB2LAB)
    back = spread(img, tri == 0, sigma)
    subject = spread(img, tri == 1, sigma)
    return np.linalg.norm(lab(back) - lab(subject), axis=-1).astype(np.float64)


def steadied(
    image: np.ndarray,
    alpha: np.ndarray,
    keep: np.ndarray,
    tri: np.ndarray,
    band_px: int,
    hair: np.ndarray | None = None,
) -> np.ndarray:
    """``alpha`` where the subject's and the background's colours lie apart, and the cut's own edge, softened by a
    pixel, where they do not (``SEPARATION_DE``): there the colour lines tell nothing, and the matte followed the
    texture of a grey tweed shoulder over a grey-blue backdrop, a ragged dark-bitten edge over a black sky. Where the
    outline is ``hair`` and the subject beside it is strands (``STRANDS_OVER`` × as textured as the backdrop) the edge
    is softened over ``HAIR_SOFT`` pixels: white hair before a pale pink painting, cut on a line and softened by one,
    was a hard stepped edge no hair has."""
    edge = cv2.GaussianBlur(keep.astype(np.float64), (0, 0), 1.0)
    if hair is not None and hair.any():
        # a cap's smooth white band, softened so, was a grey smudge over the new scene
        fine = texture(image).astype(np.float64)
        sigma = 2.0 * max(1, band_px)
        strands = spread(fine, tri == 1, sigma) >= STRANDS_OVER * spread(fine, tri == 0, sigma)
        edge = np.where(hair & strands, cv2.GaussianBlur(keep.astype(np.float64), (0, 0), HAIR_SOFT), edge)
    lo, hi = SEPARATION_DE
    weight = np.clip((separation(image, tri, band_px) - lo) / (hi - lo), 0.0, 1.0)
    return weight * alpha + (1 - weight) * edge


def texture(image: np.ndarray) -> np.ndarray:
    """(H, W) float32: the fine texture about each pixel (the root mean square over 9×9 of the grey image's
    Laplacian after a 0.8 px blur): a strand of hair's, and none of an out-of-focus backdrop's."""
    grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(np.float32)
    lap = np.asarray(cv2.Laplacian(cv2.GaussianBlur(grey, (0, 0), 0.8), cv2.CV_32F), np.float32)
    # a box filter's running sums leave tiny negatives where the image is flat
    power = np.asarray(cv2.blur(np.square(lap), (2 * TEXTURE_HALF + 1, 2 * TEXTURE_HALF + 1)), np.float32)
    return np.sqrt(np.maximum(power, 0.0))


def within_person(
    alpha: np.ndarray, keep: np.ndarray, person: np.ndarray, ramp: float = 2.0, sure: float = 0.1
) -> np.ndarray:
    """``alpha`` outside ``keep`` held to where the person segmenter sees the person (``person``: its probability,
    full alpha from ``sure`` up), but for the cut's own edge (the first ``ramp`` pixels outside, falling to 0): the
    closed-form matte found a patch of dark window behind an ear on the subject's colour line and kept it at alpha
    0.8 over the new scene, a smudge the annotators rejected. A subject the segmenter does not see as a person (less
    than half of ``keep`` at 0.5) keeps its matte as it is."""
    if not keep.any() or float(np.mean(person[keep] >= 0.5)) < 0.5:
        return alpha
    outside = cv2.distanceTransform((~keep).astype(np.uint8), cv2.DIST_L2, 3)
    cap = np.maximum(np.clip(person / sure, 0, 1), np.clip(1 - (outside - 0.5) / ramp, 0, 1))
    return np.where(keep, alpha, np.minimum(alpha, cap))
