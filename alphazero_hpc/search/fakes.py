"""Evaluators whose answers are known, for tests and for measuring the search alone. No torch.

They read the same input planes a network reads, so the search code path is the real one.
"""

from __future__ import annotations

import numpy as np

from ..game.encoding import NUM_MOVES
from ..game.rules import PIECE_VALUES


class UniformEvaluator:
    """Every legal move equally likely, every position even: search alone must find what it finds."""

    def __init__(self, history: int, attack_planes: int = 0) -> None:
        self.history = history
        self.attack_planes = attack_planes  # ignored, but the search encodes what a network of the config would read

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        b = planes.shape[0]
        return np.zeros((b, NUM_MOVES), np.float32), np.zeros(b, np.float32)


class MaterialEvaluator(UniformEvaluator):
    """Uniform policy, value = tanh(material balance / scale) for the side to move (read from planes)."""

    def __init__(self, history: int, scale: float = 3.0) -> None:
        super().__init__(history)
        self.scale = scale

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts = planes[:, :12].sum(axis=(2, 3))  # [B, 12]: our P..K, their P..K (history step 0)
        balance = counts[:, :6] @ PIECE_VALUES - counts[:, 6:] @ PIECE_VALUES
        logits, _ = super().evaluate(planes)
        return logits, np.tanh(balance / self.scale).astype(np.float32)
