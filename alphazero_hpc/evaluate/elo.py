"""Elo from match results: a match's score, its 95% interval and likelihood of superiority, and a ladder fit.

A match of W wins, D draws and L losses scores mu = (W + D/2) / N. Its Elo difference is the logistic
inverse ``-400 log10(1/mu - 1)``. The interval is the normal approximation on the score with the
per-game (trinomial) variance, mapped through the same function, as cutechess and fishtest report it.
When every game had the same result that variance is zero; the interval then falls back to Wilson's
score interval, which stays finite and does not collapse to a point. The likelihood of superiority is
``Phi((W - L) / sqrt(W + L))`` (draws carry no information about who is stronger).

The ladder (``fit_ratings``) is the maximum-likelihood logistic model over all matches, draws counted
as half a point, with one virtual draw per pair that met (so a perfect score gives a finite rating), one
player pinned at 0, and intervals from the inverse Hessian. Draws make a result less noisy than a win-or-loss
coin with the same score, so each pair's games are weighted by binomial / observed (trinomial) variance;
without that, a match of mostly draws would get an interval twice as wide as its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

Z95 = 1.959963984540054  # two-sided 95% normal quantile
_K = math.log(10.0) / 400.0  # Elo points to natural logistic units


def elo_from_score(score: float) -> float:
    """Elo difference whose expected score is ``score`` (+-inf at 1 and 0)."""
    if score >= 1.0:
        return math.inf
    if score <= 0.0:
        return -math.inf
    return -400.0 * math.log10(1.0 / score - 1.0)


def expected_score(elo_diff: float) -> float:
    return 1.0 / (1.0 + 10.0 ** (-elo_diff / 400.0))


@dataclass(frozen=True)
class MatchScore:
    """W/D/L of one player against another, from the first player's side."""

    wins: int
    draws: int
    losses: int

    def __post_init__(self) -> None:
        if min(self.wins, self.draws, self.losses) < 0:
            raise ValueError("wins, draws and losses must be >= 0")

    @classmethod
    def from_points(cls, points: Iterable[float]) -> MatchScore:
        """From the first player's points per game (1, 0.5 or 0)."""
        pts = list(points)
        return cls(pts.count(1.0), pts.count(0.5), pts.count(0.0))

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.5

    @property
    def elo(self) -> float:
        return elo_from_score(self.score)

    @property
    def score_variance(self) -> float:
        """The variance of one game's points about the match's score (draws as half a point); 0 without games."""
        n, mu = self.games, self.score
        return (self.wins * (1 - mu) ** 2 + self.draws * (0.5 - mu) ** 2 + self.losses * mu**2) / n if n else 0.0

    def score_interval(self, z: float = Z95) -> tuple[float, float]:
        n, mu = self.games, self.score
        if n == 0:
            return 0.0, 1.0
        var = self.score_variance
        if var > 0:
            half = z * math.sqrt(var / n)
            return max(0.0, mu - half), min(1.0, mu + half)
        # Every game the same result: Wilson's interval for a proportion mu of n.
        centre = (mu + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(mu * (1 - mu) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return (0.0 if mu == 0 else centre - half), (1.0 if mu == 1 else centre + half)

    def elo_interval(self, z: float = Z95) -> tuple[float, float]:
        lo, hi = self.score_interval(z)
        return elo_from_score(lo), elo_from_score(hi)

    @property
    def los(self) -> float:
        """Likelihood of superiority: probability that the first player is the stronger one."""
        decisive = self.wins + self.losses
        if decisive == 0:
            return 0.5
        return 0.5 * (1.0 + math.erf((self.wins - self.losses) / math.sqrt(2.0 * decisive)))

    def summary(self) -> dict[str, float | int | None]:
        lo, hi = self.elo_interval()
        return {"wins": self.wins, "draws": self.draws, "losses": self.losses, "games": self.games,
                "score": round(self.score, 4), "elo": _finite(self.elo), "elo_low": _finite(lo),
                "elo_high": _finite(hi), "los": round(self.los, 4)}


def _finite(x: float) -> float | None:
    """JSON has no infinity: an unbounded Elo is stored as null (the score says which way)."""
    return round(x, 1) if math.isfinite(x) else None


def format_elo(x: float | None, score: float) -> str:
    if x is None:
        return "+inf" if score >= 0.5 else "-inf"
    return f"{round(x) + 0:+d}"  # + 0: no "-0"


@dataclass(frozen=True)
class Rating:
    name: str
    elo: float | None  # None: not connected to the anchor by any chain of matches
    low: float | None
    high: float | None
    games: int


def fit_ratings(matches: Iterable[tuple[str, str, MatchScore]], anchor: str,
                anchor_elo: float = 0.0, prior_draws: float = 1.0, z: float = Z95,
                pinned: Mapping[str, tuple[float, float]] | None = None,
                pinned_cov: Mapping[tuple[str, str], float] | None = None) -> dict[str, Rating]:
    """Ratings of every player in ``matches`` (first player, second player, first player's W/D/L).

    ``anchor`` is pinned at ``anchor_elo``; intervals are relative to it. ``pinned`` fixes more players at known
    ratings, each ``(elo, standard deviation)`` relative to the anchor (the rungs of a calibrated scale): the
    others are fitted against them, and their intervals carry the pinned players' uncertainty too (the delta
    method: how far a free rating moves when a pinned one does). ``pinned_cov`` gives the covariances (Elo^2)
    between pinned players, keyed by either order of a pair: rungs calibrated along one chain of matches share
    errors, and a player rated against two of them moves with their common error, which the standard deviations
    alone would count as independent (too narrow an interval). Pairs not given are uncorrelated. Players with no
    chain of matches to the anchor or a pinned player get ``elo=None``.
    """
    fit = _solve(matches, anchor, anchor_elo, prior_draws, pinned or {})
    if fit.free and fit.pins:  # the pinned ratings' own (co)variance, carried through d(free)/d(pinned) = -H^-1 cross
        sens = -fit.cov @ fit.cross
        cov = _pinned_covariance(fit.pins, fit.fixed, pinned_cov or {})
        fit.cov = fit.cov + sens @ cov @ sens.T
    out: dict[str, Rating] = {}
    for p in fit.players:
        if p not in fit.reach:
            out[p] = Rating(p, None, None, None, fit.played[p])
            continue
        elo = anchor_elo + fit.rating(p) / _K
        sd = fit.fixed[p][1] * _K if p in fit.fixed else math.sqrt(float(fit.cov[fit.idx[p], fit.idx[p]]))
        half = z * sd / _K
        out[p] = Rating(p, elo, elo - half, elo + half, fit.played[p])
    return out


def rating_covariance(matches: Iterable[tuple[str, str, MatchScore]], anchor: str, anchor_elo: float = 0.0,
                      prior_draws: float = 1.0) -> dict[tuple[str, str], float]:
    """The covariances (Elo^2) of the ratings that ``fit_ratings`` fits with only ``anchor`` pinned, every ordered
    pair of players connected to it (the anchor itself has none: it is exact). Players rated along one chain of
    matches share that chain's errors: in a chain anchor - a - b, b's error is a's plus that of the a-b match, so
    cov(a, b) = var(a)."""
    fit = _solve(matches, anchor, anchor_elo, prior_draws, {})
    scale = 1.0 / (_K * _K)
    return {(p, q): float(fit.cov[i, j]) * scale for p, i in fit.idx.items() for q, j in fit.idx.items()}


def _pinned_covariance(pins: list[str], fixed: Mapping[str, tuple[float, float]],
                       pinned_cov: Mapping[tuple[str, str], float]) -> np.ndarray:
    """The pinned players' covariance in natural units: standard deviations on the diagonal, ``pinned_cov`` off it
    (a pair given in either order)."""
    out = np.diag([(fixed[p][1] * _K) ** 2 for p in pins])
    for i, p in enumerate(pins):
        for j, q in enumerate(pins):
            if i != j:
                given = {pinned_cov[k] for k in ((p, q), (q, p)) if k in pinned_cov}
                if len(given) > 1:
                    raise ValueError(f"pinned_cov gives {p} and {q} two covariances: {sorted(given)}")
                out[i, j] = (given.pop() if given else 0.0) * _K * _K
    if np.linalg.eigvalsh(out).min() < -1e-9 * max(1.0, float(np.abs(out).max())):
        raise ValueError("the pinned players' covariance (standard deviations and pinned_cov) is not positive semi-definite")
    return out


@dataclass
class _Fit:
    """The maximum-likelihood solution, natural units: free players' ratings and inverse observed information
    (``cov``), and the information between free and pinned players (``cross``)."""

    players: list[str]
    played: dict[str, int]
    fixed: dict[str, tuple[float, float]]
    reach: set[str]
    free: list[str]
    pins: list[str]
    idx: dict[str, int]
    r: np.ndarray
    cov: np.ndarray
    cross: np.ndarray
    anchor_elo: float

    def rating(self, p: str) -> float:
        return (self.fixed[p][0] - self.anchor_elo) * _K if p in self.fixed else float(self.r[self.idx[p]])


def _solve(matches: Iterable[tuple[str, str, MatchScore]], anchor: str, anchor_elo: float, prior_draws: float,
           pinned: Mapping[str, tuple[float, float]]) -> _Fit:
    fixed = {anchor: (anchor_elo, 0.0), **{k: v for k, v in pinned.items() if k != anchor}}
    wdl = _by_pair(matches)
    played: dict[str, int] = {}
    for (a, b), counts in wdl.items():
        played[a] = played.get(a, 0) + sum(counts)
        played[b] = played.get(b, 0) + sum(counts)
    pts: dict[tuple[str, str], float] = {}
    games: dict[tuple[str, str], float] = {}
    for key, (won, drawn, lost) in wdl.items():
        pts[key], games[key] = _weighted(won, drawn, lost, prior_draws)
    players = sorted(played)
    fixed = {p: v for p, v in fixed.items() if p in played}
    reach: set[str] = set()
    for p in fixed:
        reach |= _connected(p, games.keys())
    free = [p for p in players if p in reach and p not in fixed]
    pins = sorted(fixed)
    idx = {p: i for i, p in enumerate(free)}
    pidx = {p: i for i, p in enumerate(pins)}
    pairs = [(a, b, pts[(a, b)], games[(a, b)]) for a, b in games if a in reach]
    # natural units, the anchor at 0; free players start at the mean of the pinned ones (a scale's middle)
    start = float(np.mean([(v[0] - anchor_elo) * _K for v in fixed.values()])) if fixed else 0.0
    fit = _Fit(players, played, fixed, reach, free, pins, idx, np.full(len(free), start),
               np.zeros((len(free), len(free))), np.zeros((len(free), len(pins))), anchor_elo)
    for _ in range(100):
        grad = np.zeros(len(free))
        hess = np.zeros((len(free), len(free)))
        fit.cross[:] = 0.0
        for a, b, score, n in pairs:
            e = 1.0 / (1.0 + math.exp(fit.rating(b) - fit.rating(a)))
            g, h = score - n * e, n * e * (1 - e)
            for p, sign in ((a, 1.0), (b, -1.0)):
                if p in idx:
                    grad[idx[p]] += sign * g
                    hess[idx[p], idx[p]] += h
            for p, q in ((a, b), (b, a)):
                if p in idx and q in idx:
                    hess[idx[p], idx[q]] -= h
                elif p in idx and q in pidx:
                    fit.cross[idx[p], pidx[q]] -= h
        if not free:
            break
        fit.cov = np.linalg.inv(hess)
        step = fit.cov @ grad
        step *= min(1.0, 1.0 / max(np.abs(step).max(), 1e-300))  # at most ~174 Elo a step: far starts converge
        fit.r += step
        if np.abs(step).max() < 1e-10:
            break
    return fit


def _by_pair(matches: Iterable[tuple[str, str, MatchScore]]) -> dict[tuple[str, str], list[int]]:
    """Every pair's games summed: keyed by the two names sorted, the first name's [W, D, L]; self-play and empty
    matches left out."""
    wdl: dict[tuple[str, str], list[int]] = {}
    for a, b, s in matches:
        if a == b or s.games == 0:
            continue
        key = (a, b) if a < b else (b, a)
        w, l = (s.wins, s.losses) if key[0] == a else (s.losses, s.wins)
        acc = wdl.setdefault(key, [0, 0, 0])
        acc[0] += w
        acc[1] += s.draws
        acc[2] += l
    return wdl


def _weighted(won: float, drawn: float, lost: float, prior_draws: float) -> tuple[float, float]:
    """A pair's (points, games) as the fit counts them: the prior draws added, and each game weighted by the
    information its draws add (binomial over observed variance, at most 4)."""
    drawn += prior_draws
    n = won + drawn + lost
    mu = (won + 0.5 * drawn) / n
    var = (won * (1 - mu) ** 2 + drawn * (0.5 - mu) ** 2 + lost * mu**2) / n
    weight = min(mu * (1 - mu) / var, 4.0) if var > 0 else 4.0  # draws: more information per game
    return weight * (won + 0.5 * drawn), weight * n


@dataclass(frozen=True)
class PairFit:
    """How one pair's games sit against the fitted ratings: its score, the one the ratings predict, and the Pearson
    residual in standard errors (the fit's own weighting, so that the squares sum to a chi-square)."""

    first: str
    second: str
    games: int
    score: float
    expected: float
    z: float


def pair_residuals(matches: Iterable[tuple[str, str, MatchScore]], ratings: Mapping[str, float],
                   prior_draws: float = 1.0) -> list[PairFit]:
    """Every pair of rated players that met, with its residual against ``ratings`` (Elo): the goodness of fit of a
    ladder. Under the logistic model the squares sum to about the pairs less the fitted players; pairs far beyond
    2 standard errors say where the model does not hold (players that are not transitive, an engine whose strength
    changed between matches, e.g. a timed one on a loaded machine), which no interval shows."""
    out = []
    for (a, b), (w, d, l) in sorted(_by_pair((a, b, s) for a, b, s in matches if a in ratings and b in ratings).items()):
        pts, n = _weighted(w, d, l, prior_draws)
        e = expected_score(ratings[a] - ratings[b])
        z = (pts - n * e) / math.sqrt(n * e * (1 - e)) if 0 < e < 1 else 0.0
        out.append(PairFit(a, b, w + d + l, (w + d / 2) / (w + d + l), e, z))
    return out


def _connected(start: str, edges: Iterable[tuple[str, str]]) -> set[str]:
    adj: dict[str, set[str]] = {}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    seen, todo = {start}, [start]
    while todo:
        for q in adj.get(todo.pop(), ()):
            if q not in seen:
                seen.add(q)
                todo.append(q)
    return seen


def ladder_table(ratings: Mapping[str, Rating]) -> list[Rating]:
    """Ratings strongest first; unconnected players last."""
    return sorted(ratings.values(), key=lambda r: (r.elo is None, -(r.elo or 0.0), r.name))
