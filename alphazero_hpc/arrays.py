"""Numpy helpers shared by the search and the training data reader."""

from __future__ import annotations

import numpy as np


def ragged_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ranges [starts[i], starts[i] + counts[i])."""
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(total)
