"""``azhpc seeds``: the runs of one recipe from different seeds, side by side on the calibrated scale.

One run's rating says how strong that run's network is; what a recipe is worth is the mean over its runs, and how far
one more run may land from it. Each run's ledger is fitted on the scale as ``azhpc elo --scale`` fits it, its last
rated network at one play setting (the tag that ``azhpc elo`` prints after ``@``) is taken, and the ratings give:

- the mean and its 95% interval, ``mean +- t * sd / sqrt(n)`` with Student's t at n - 1 degrees of freedom;
- a 95% prediction for one more run, ``mean +- t * sd * sqrt(1 + 1/n)``;
- the spread between runs beyond the ratings' own error, ``sqrt(sd^2 - mean(se^2))``, each rating's standard error
  read from its interval. The runs share their rungs' calibration, so that error is not wholly independent between
  runs; the figure is a rough split, not a test.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import AzhpcError
from .elo import Z95
from .ladder import run_ladder


def student_t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t with ``df`` degrees of freedom, by integrating its density
    (Simpson's rule) and bisecting; within 1e-4 of the printed tables."""
    if not 0.5 < p < 1.0 or df < 1:
        raise ValueError(f"need 0.5 < p < 1 and df >= 1, got p={p}, df={df}")
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(x: float) -> float:
        xs = np.linspace(0.0, x, 4001)
        ys = np.exp(log_c - (df + 1) / 2 * np.log1p(xs * xs / df))
        h = x / 4000
        return 0.5 + h / 3 * float(ys[0] + ys[-1] + 4 * ys[1:-1:2].sum() + 2 * ys[2:-1:2].sum())

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class RunRating:
    """One run's network at the chosen play setting: the player's name in the run's ladder and its rating."""

    run: Path
    player: str
    elo: float
    low: float
    high: float
    games: int


@dataclass(frozen=True)
class SeedSummary:
    """The runs' ratings and what they say about the recipe (module docstring)."""

    runs: list[RunRating]
    mean: float
    sd: float
    mean_low: float
    mean_high: float
    next_low: float
    next_high: float
    between_sd: float

    @property
    def df(self) -> int:
        return len(self.runs) - 1


def player_pattern(tag: str) -> re.Pattern[str]:
    """Names of a run's networks playing at ``tag`` ("" for the run's own search): ``gen:78``, ``gen:78@puct800,T=3``."""
    return re.compile(r"gen:(\d+)" + (re.escape("@" + tag) if tag else ""))


def rate_runs(run_dirs: list[Path], tag: str = "", generation: int | None = None,
              table: Path | None = None) -> SeedSummary:
    """Each run's last rated network at ``tag`` (or its ``generation``) on the scale, and their summary."""
    if len(run_dirs) < 2:
        raise AzhpcError("a mean's interval needs at least two runs: name every run of the recipe, e.g. "
                         "azhpc seeds scratch/learning-s1/6x64-rr2 scratch/learning-s2/6x64-rr2")
    seen: dict[Path, Path] = {}
    for run in run_dirs:
        if run.resolve() in seen:
            raise AzhpcError(f"{run} is named twice (as {seen[run.resolve()]}): name each run once")
        seen[run.resolve()] = run
    pattern = player_pattern(tag)
    setting = f"at {tag}" if tag else "at its run's own search"
    rated = []
    for run in run_dirs:
        ratings, _, _ = run_ladder(run, scale=True, table=table, write=False)
        found = {int(m.group(1)): r for r in ratings if (m := pattern.fullmatch(r.name)) and r.elo is not None}
        if generation is not None:
            found = {g: r for g, r in found.items() if g == generation}
        if not found:
            names = ", ".join(r.name for r in ratings if r.name.startswith("gen:")) or "none"
            which = f"generation {generation}" if generation is not None else "a network"
            raise AzhpcError(f"{run}: {which} rated {setting} is not in its ledger (its networks: {names}): "
                             f"rate it with azhpc evaluate {run} --generation {'G' if generation is None else generation} --scale "
                             "and the same play options, "
                             "or pick the setting with --tag")
        r = found[max(found)]
        assert r.elo is not None and r.low is not None and r.high is not None  # found keeps rated players only
        rated.append(RunRating(run, r.name, r.elo, r.low, r.high, r.games))
    elos = np.array([r.elo for r in rated])
    n, mean, sd = len(rated), float(elos.mean()), float(elos.std(ddof=1))
    t = student_t_quantile(0.975, n - 1)
    half, half_next = t * sd / math.sqrt(n), t * sd * math.sqrt(1 + 1 / n)
    own_var = float(np.mean([((r.high - r.low) / (2 * Z95)) ** 2 for r in rated]))
    return SeedSummary(rated, mean, sd, mean - half, mean + half, mean - half_next, mean + half_next,
                       math.sqrt(max(sd * sd - own_var, 0.0)))
