"""The band index finds exactly the pairs the all-pairs comparison finds, and the gates' near-duplicate verdicts
are unchanged by it."""

from itertools import combinations

import pytest
from helpers import clustered_hashes

from perceptforge.logic.gates import hamming, near_duplicates
from perceptforge.logic.hash_index import bands, close_pairs


def brute_pairs(hashes: list[int], within: int) -> list[tuple[int, int, int]]:
    return [(i, j, hamming(a, b)) for (i, a), (j, b) in combinations(enumerate(hashes), 2) if hamming(a, b) <= within]


def brute_dupes(hashes: list[tuple[str, int]], min_distance: int) -> dict[str, str]:
    kept: list[tuple[str, int]] = []
    dupes = {}
    for unit, h in hashes:
        twin = next((u for u, k in kept if hamming(h, k) < min_distance), None)
        if twin:
            dupes[unit] = twin
        else:
            kept.append((unit, h))
    return dupes


def test_bands_cover_every_bit_once():
    for within in (0, 3, 4, 10, 63, 80):
        covered = [shift + k for shift, mask in bands(within) for k in range(mask.bit_length())]
        assert covered == list(range(64))


@pytest.mark.parametrize("within", [0, 1, 3, 4, 6])
@pytest.mark.parametrize("seed", [0, 1])
def test_close_pairs_equal_all_pairs(within, seed):
    hashes = clustered_hashes(300, seed)
    assert close_pairs(hashes, within) == brute_pairs(hashes, within)


@pytest.mark.parametrize("min_distance", [0, 1, 4, 7])
def test_near_duplicates_equal_all_pairs(min_distance):
    units = [(f"u{k:03d}", h) for k, h in enumerate(clustered_hashes(300, 2))]
    assert near_duplicates(units, min_distance) == brute_dupes(units, min_distance)
    assert near_duplicates(units[:1], min_distance) == {}
