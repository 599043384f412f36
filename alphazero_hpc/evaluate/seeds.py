"""``azhpc seeds``: the runs of one recipe from different seeds, side by side on the calibrated scale.

One run's rating says how strong that run's network is; what a recipe is worth is the mean over its runs, and how far
one more run may land from it. Each run's ledger is fitted on the scale as ``azhpc elo --scale`` fits it, its last
rated network at one play setting (the tag that ``azhpc elo`` prints after ``@``) is taken, and the ratings give:

- the mean and its 95% interval, ``mean +- t * sd / sqrt(n)`` with Student's t at n - 1 degrees of freedom. That
  interval comes from the runs' spread, which already holds each rating's own games' error. The rungs' calibration
  is another matter: it moves every run rated against the same rungs the same way, so no spread shows it. Its part
  of each rating's interval (the rating fitted again with the rungs taken as exact, the difference of the two
  variances) is added to the mean's interval for the second, wider one, which is what to compare with a fixed point
  of the scale such as 1000;
- a 95% prediction for one more run, ``mean +- t * sd * sqrt(1 + 1/n)``;
- the spread between runs beyond the ratings' own games, ``sqrt(sd^2 - mean(se^2))``, each rating's games-only
  standard error read from the fit with exact rungs. A rough split, not a test.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import AzhpcError
from ..store.paths import RunPaths
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
    """One run's network at the chosen play setting: the player's name in the run's ladder, its rating and interval
    (the rungs' calibration included) and the half-width of its own games alone (the rungs taken as exact)."""

    run: Path
    player: str
    elo: float
    low: float
    high: float
    games_half: float
    games: int


@dataclass(frozen=True)
class SeedSummary:
    """The runs' ratings and what they say about the recipe (module docstring)."""

    runs: list[RunRating]
    mean: float
    sd: float
    df: int
    mean_low: float  # from the runs' spread
    mean_high: float
    calibration_half: float  # the rungs' calibration, shared by the runs: 95% half-width
    next_low: float
    next_high: float
    between_sd: float

    @property
    def mean_interval_calibrated(self) -> tuple[float, float]:
        """The mean's interval with the rungs' calibration added, what to compare with a fixed point of the scale."""
        half = math.hypot(self.mean_high - self.mean, self.calibration_half)
        return self.mean - half, self.mean + half


def player_pattern(tag: str) -> re.Pattern[str]:
    """Names of a run's networks playing at ``tag`` ("" for the run's own search): ``gen:78``, ``gen:78@puct800,T=3``."""
    return re.compile(r"gen:(\d+)" + (re.escape("@" + tag) if tag else ""))


def rate_runs(run_dirs: list[Path], tag: str = "", generation: int | None = None,
              table: Path | None = None) -> SeedSummary:
    """Each run's last rated network at ``tag`` (or its ``generation``) on the scale, and their summary."""
    if len(run_dirs) < 2:
        raise AzhpcError("a mean's interval needs at least two runs: name every run of the recipe, e.g. "
                         "azhpc seeds scratch/learning-s1/6x64-rr2 scratch/learning-s2/6x64-rr2")
    tag = tag.removeprefix("@")
    seen: dict[Path, Path] = {}
    for run in run_dirs:
        if run.resolve() in seen:
            raise AzhpcError(f"{run} is named twice (as {seen[run.resolve()]}): name each run once")
        seen[run.resolve()] = run
        if not RunPaths(run).ledger.is_file():
            raise AzhpcError(f"{run}: no evaluation ledger ({RunPaths(run).ledger}): name a run folder whose networks "
                             f"were rated, or rate them first with azhpc evaluate {run} --generation G --scale")
    pattern = player_pattern(tag)
    return summarise([_run_rating(run, pattern, tag, generation, table) for run in run_dirs])


def summarise(rated: list[RunRating]) -> SeedSummary:
    """The runs' mean, its interval from their spread (Student's t), the rungs' shared calibration, a 95% prediction
    for one more run and the spread between networks once each rating's own games' error is taken out."""
    elos = np.array([r.elo for r in rated])
    n, mean, sd = len(rated), float(elos.mean()), float(elos.std(ddof=1))
    t = student_t_quantile(0.975, n - 1)
    half, half_next = t * sd / math.sqrt(n), t * sd * math.sqrt(1 + 1 / n)
    games_var = [(r.games_half / Z95) ** 2 for r in rated]
    calibration_var = [max(((r.high - r.low) / (2 * Z95)) ** 2 - v, 0.0) for r, v in zip(rated, games_var)]
    return SeedSummary(rated, mean, sd, n - 1, mean - half, mean + half, Z95 * math.sqrt(float(np.mean(calibration_var))),
                       mean - half_next, mean + half_next, math.sqrt(max(sd * sd - float(np.mean(games_var)), 0.0)))


def _run_rating(run: Path, pattern: re.Pattern[str], tag: str, generation: int | None, table: Path | None) -> RunRating:
    ratings, _, _ = run_ladder(run, scale=True, table=table, write=False)
    found = {int(m.group(1)): r for r in ratings if (m := pattern.fullmatch(r.name)) and r.elo is not None}
    if generation is not None:
        found = {g: r for g, r in found.items() if g == generation}
    if not found:
        tags = sorted({r.name.partition("@")[2] or "(its own search)" for r in ratings
                       if r.name.startswith("gen:") and r.elo is not None})
        which = f"generation {generation}" if generation is not None else "a network"
        raise AzhpcError(f"{run}: {which} rated {f'at {tag}' if tag else 'at its own search'} is not in its ledger "
                         f"(it rates networks at: {', '.join(tags) or 'none'}): pick one with --tag, or rate it with "
                         f"azhpc evaluate {run} --generation {'G' if generation is None else generation} --scale "
                         "and the same play options")
    r = found[max(found)]
    exact = {x.name: x for x in run_ladder(run, scale=True, table=table, write=False, exact_rungs=True)[0]}[r.name]
    assert r.elo is not None and r.low is not None and r.high is not None  # found keeps rated players only
    assert exact.low is not None and exact.high is not None
    return RunRating(run, r.name, r.elo, r.low, r.high, (exact.high - exact.low) / 2, r.games)
