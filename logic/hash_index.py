"""Near-duplicate look-up over perceptual hashes without comparing every pair.

Pigeonhole: split the hash's bits into ``within + 1`` bands; two hashes at most ``within`` bits apart agree exactly
on at least one band. So a hash is compared only with those sharing a band value, and the work grows with the
number of hashes and the size of their buckets, not with its square (``benchmarks/scale_out.py`` times it).
The answers are exactly those of the all-pairs comparison (``tests/test_hash_index.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

BITS = 64


def hash_int(bits: np.ndarray) -> int:
    """A hash's bits (``imagehash.ImageHash.hash``, row by row, the first bit highest) as one integer."""
    return int.from_bytes(np.packbits(np.asarray(bits, bool).ravel()).tobytes(), "big")


def bands(within: int, bits: int = BITS) -> list[tuple[int, int]]:
    """(shift, mask) of each of ``within + 1`` bands that cover ``bits`` bits."""
    n = min(within + 1, bits)
    edges = [round(k * bits / n) for k in range(n + 1)]
    return [(lo, (1 << (hi - lo)) - 1) for lo, hi in zip(edges, edges[1:])]


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()


class HashIndex:
    """Hashes added one by one; ``near(h)`` gives the indices of those at most ``within`` bits from ``h``."""

    def __init__(self, within: int, bits: int = BITS):
        self.within = within
        self.bands = bands(within, bits)
        self.hashes: list[int] = []
        self.buckets: list[defaultdict[int, list[int]]] = [defaultdict(list) for _ in self.bands]

    def add(self, h: int) -> int:
        index = len(self.hashes)
        self.hashes.append(h)
        for (shift, mask), bucket in zip(self.bands, self.buckets):
            bucket[h >> shift & mask].append(index)
        return index

    def near(self, h: int) -> list[int]:
        """Indices of added hashes within ``within`` bits of ``h``, ascending."""
        seen: set[int] = set()
        for (shift, mask), bucket in zip(self.bands, self.buckets):
            seen.update(bucket.get(h >> shift & mask, ()))
        return sorted(i for i in seen if hamming(self.hashes[i], h) <= self.within)


def close_pairs(hashes: Sequence[int], within: int) -> list[tuple[int, int, int]]:
    """(i, j, distance) for every i < j whose hashes are at most ``within`` bits apart, in (i, j) order."""
    if within < 0:
        return []
    index = HashIndex(within)
    pairs = []
    for j, h in enumerate(hashes):
        pairs += [(i, j, hamming(hashes[i], h)) for i in index.near(h)]
        index.add(h)
    return sorted(pairs)
