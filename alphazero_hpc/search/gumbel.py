"""Gumbel root search (Danihelka et al., ICLR 2022, "Policy improvement by planning with Gumbel"), in numpy.

At the root the search does not explore by PUCT. It adds Gumbel noise ``g`` to the prior logits (none in
evaluation), considers the top ``m`` moves by ``g + logits``, and spends its ``n`` simulations by sequential
halving: every considered move gets the same number of visits, then the better half by
``g + logits + sigma(q)`` goes on, and so on. The move played is the survivor. The policy target is the
improved policy ``softmax(logits + sigma(completed q))``, which the paper shows improves on the prior even
with 2 simulations, where visit counts say almost nothing.

``sigma(q) = (c_visit + max_b N(b)) * c_scale * q'``, with ``q'`` the completed Q-values rescaled to [0, 1]
over the root's moves; a move not yet visited is completed with the mixed value (the network's value of the
root mixed with the prior-weighted Q of the visited moves). The schedule of visits is a pure function of
``m`` and ``n`` (``considered_visits``), so a batch of games advances in lock step without any of them
waiting for another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LOW_LOGIT = -1e9  # stands for minus infinity in the scores, so that argmax never sees a NaN


def considered_visit(m: int, n: int, i: int) -> int:
    """Sequential halving of ``n`` simulations over ``m`` considered moves: at simulation ``i`` the search visits
    a move that has exactly this many visits (of this search). Each phase gives every remaining move
    ``max(1, n // (ceil(log2 m) * remaining))`` visits, then halves the remaining moves (never below 2); past
    ``n`` the last two keep going. Computed per index, so a budget of 10**9 (UCI's infinite) costs nothing."""
    if m <= 1:
        return i
    log2m = math.ceil(math.log2(m))
    remaining, start, base = m, 0, 0
    while True:
        extra = max(1, int(n / (log2m * remaining)))
        if i < start + extra * remaining:
            return base + (i - start) // remaining
        start += extra * remaining
        base += extra
        remaining = max(2, remaining // 2)


def considered_visits(m: int, n: int) -> tuple[int, ...]:
    """The whole schedule: ``considered_visit(m, n, i)`` for i in 0..n-1."""
    return tuple(considered_visit(m, n, i) for i in range(n))


def mixed_value(raw_value: float, q: np.ndarray, visits: np.ndarray, priors: np.ndarray) -> float:
    """The value an unvisited move is completed with: the network's value of the node and the visited moves'
    Q-values weighted by their priors, each visit counting as one observation."""
    visited = visits > 0
    total = float(visits.sum())
    if not visited.any():
        return raw_value
    p = np.maximum(priors, np.finfo(np.float32).tiny)
    weighted_q = float((p[visited] * q[visited]).sum() / p[visited].sum())
    return (raw_value + total * weighted_q) / (total + 1.0)


def completed_q(q: np.ndarray, visits: np.ndarray, priors: np.ndarray, raw_value: float) -> np.ndarray:
    """[A] float64: each visited move's q, the mixed value for the others. ``q`` [A] is each move's mean value for
    the side to move."""
    return np.where(visits > 0, q, mixed_value(raw_value, q, visits, priors)).astype(np.float64)


def sigma(q: np.ndarray, visits: np.ndarray, priors: np.ndarray, raw_value: float, c_visit: float,
          c_scale: float) -> np.ndarray:
    """[A] sigma of the completed Q-values: completed, rescaled to [0, 1] over the moves, times
    ``(c_visit + max visits) * c_scale``."""
    completed = completed_q(q, visits, priors, raw_value)
    lo, hi = completed.min(), completed.max()
    rescaled = (completed - lo) / max(hi - lo, 1e-8)
    return (c_visit + float(visits.max())) * c_scale * rescaled


def improved_policy(logits: np.ndarray, sig: np.ndarray) -> np.ndarray:
    """[A] float32 softmax(logits + sigma(completed q)): the policy training target."""
    z = logits.astype(np.float64) + sig
    z -= z.max()
    e = np.exp(z)
    return (e / e.sum()).astype(np.float32)


def improved_value(improved: np.ndarray, q: np.ndarray, visits: np.ndarray, priors: np.ndarray,
                   raw_value: float) -> float:
    """The root's value under the improved policy: ``sum_a improved(a) * completed_q(a)``. Sequential halving
    visits every considered move alike in its first phase, so the mean over visits averages good and bad moves
    (at 16 simulations over 16 moves, the mean of 16 one-visit moves); this weighs each move as the policy
    target does, close to the best move's value when sigma separates them."""
    return float(np.dot(improved.astype(np.float64), completed_q(q, visits, priors, raw_value)))


def log_priors(priors: np.ndarray) -> np.ndarray:
    """The prior logits, normalised (log-softmax): what the network's logits are over the legal moves."""
    return np.log(np.maximum(priors.astype(np.float64), 1e-30))


@dataclass
class GumbelRoot:
    """One root's search of one move: its noise, its budget and where the visits of this search started."""

    gumbel: np.ndarray  # [A] Gumbel(0, 1) noise times its scale (zeros: no noise)
    simulations: int  # n, this move's budget
    considered: int  # m = min(mcts.gumbel_considered, legal moves)
    base: np.ndarray  # [A] visits of each move before this search (a reused subtree keeps its visits)

    def score(self, target: int, logits: np.ndarray, sig: np.ndarray, visits: np.ndarray) -> np.ndarray:
        """[A] ``g + logits + sigma(q)`` of the moves whose visits in this search equal ``target``, LOW_LOGIT-ish
        (minus infinity) elsewhere."""
        mine = visits - self.base
        s = np.maximum(LOW_LOGIT, self.gumbel + (logits - logits.max()) + sig)
        return np.where(mine == target, s, -np.inf)

    def done(self, visits: np.ndarray) -> int:
        """Simulations this search has spent at the root."""
        return int((visits - self.base).sum())

    def next_move(self, logits: np.ndarray, sig: np.ndarray, visits: np.ndarray) -> int:
        """The root move of the next simulation, by the schedule of sequential halving (past the budget, the
        schedule's last phase goes on)."""
        score = self.score(considered_visit(self.considered, self.simulations, self.done(visits)), logits, sig, visits)
        if not np.isfinite(score).any():  # no move has exactly that count (a stop came early): the fewest visits
            mine = visits - self.base
            score = self.score(int(mine[self.considered_moves(logits)].min()), logits, sig, visits)
        return int(np.argmax(score))

    def considered_moves(self, logits: np.ndarray) -> np.ndarray:
        """Indices of the ``m`` moves with the highest ``g + logits``."""
        return np.argsort(-(self.gumbel + logits), kind="stable")[: self.considered]

    def survivor(self, logits: np.ndarray, sig: np.ndarray, visits: np.ndarray) -> int:
        """The move to play: among the most visited of this search, the best ``g + logits + sigma(q)``."""
        mine = visits - self.base
        return int(np.argmax(self.score(int(mine.max()), logits, sig, visits)))
