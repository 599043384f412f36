"""What the search asks of a network, and nothing more: the search never imports torch."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Evaluator(Protocol):
    """What the search asks of a network. ``planes`` is float32 [B, C, 8, 8]; the answer is policy logits
    float32 [B, 4672] and values float32 [B] in [-1, 1] for the side to move."""

    history: int
    attack_planes: int  # sets of game.attacks' maps the planes end with (ModelConfig.attack_sets: 0, 1, 2)

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
