"""Evaluators whose answers are known, for tests and for measuring the search alone. No torch.

They read the same input planes a network reads, so the search code path is the real one.
"""

from __future__ import annotations

import chess
import numpy as np

from .encoding import NUM_MOVES

PIECE_VALUES = np.array([1.0, 3.0, 3.0, 5.0, 9.0, 0.0], dtype=np.float32)  # P N B R Q K
_POINTS = tuple(zip(chess.PIECE_TYPES, PIECE_VALUES.astype(int).tolist()))  # the same values, per python-chess piece


def material_balance(board: chess.Board) -> int:
    """White's material minus Black's in pawns (P 1, N 3, B 3, R 5, Q 9)."""
    return sum(points * (chess.popcount(board.pieces_mask(piece, chess.WHITE)) - chess.popcount(board.pieces_mask(piece, chess.BLACK)))
               for piece, points in _POINTS)


def material_winner(board: chess.Board, threshold: int) -> int:
    """+1 if White is at least ``threshold`` pawns of material ahead, -1 if Black is, else 0 (also when
    ``threshold`` is 0: no adjudication). Self-play and evaluation adjudicate draws by rule with it."""
    if threshold <= 0:
        return 0
    balance = material_balance(board)
    return (1 if balance > 0 else -1) if abs(balance) >= threshold else 0


class UniformEvaluator:
    """Every legal move equally likely, every position even: search alone must find what it finds."""

    def __init__(self, history: int) -> None:
        self.history = history

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
