"""``azhpc elo``: one rating per evaluated player of a run, from every match in its ledger."""

from __future__ import annotations

import re
from pathlib import Path

from ..config import Config
from ..errors import AzhpcError
from ..store import atomic
from ..store.paths import RunPaths
from ..store.runconfig import run_config_if_any
from .elo import MatchScore, Rating, fit_ratings, ladder_table
from .ledger import LedgerEntry, read_ledger, search_tag


def run_ladder(run_dir: Path, anchor: str = "random", adjudicate_material: int = 0, write: bool = True,
               scale: bool | None = None, table: Path | None = None,
               exact_rungs: bool = False) -> tuple[list[Rating], list[LedgerEntry], bool]:
    """Fit the ladder of a run over the matches scored with ``adjudicate_material`` (0: chess rules only; matches
    scored differently are not mixed); with ``write`` (``azhpc elo``) store it in RUN/eval/ratings.json. Returns
    the table, the matches and whether it is on the calibrated scale.

    On the scale (``scale`` True, or None and the chess-rules ledger has a match against an engine rung) every rung
    of the shipped table (or ``table``) is pinned at its calibrated rating (``exact_rungs``: taken as exact, so that
    the intervals hold the players' own games only); otherwise ``anchor`` is pinned at 0."""
    from .scale import SCALE_NAME, counts_in_fit, exact, has_engine_rung, load_scale, scale_fit

    paths = RunPaths(run_dir)
    entries = [e for e in read_ledger(paths) if counts_in_fit(e, adjudicate_material)]
    if not entries:
        raise AzhpcError(f"no evaluations in {paths.ledger}"
                         + (f" scored with adjudicate_material={adjudicate_material}" if adjudicate_material else "")
                         + f": run azhpc evaluate {run_dir} --generation G --opponent random first")
    cfg = run_config_if_any(paths)  # how the run's own networks play
    matches = [(player_label(e["player"], e, cfg), player_label(e["opponent"], e, cfg), MatchScore(e["wins"], e["draws"], e["losses"]))
               for e in entries]
    names = {m[0] for m in matches} | {m[1] for m in matches}
    if scale and adjudicate_material:
        raise AzhpcError(f"the scale is calibrated with chess rules only: fit {paths.ledger}'s matches with "
                         "--adjudicate-material 0, or without --scale")
    on_scale = bool(scale) if scale is not None else not adjudicate_material and has_engine_rung(names)
    if on_scale:
        rungs = exact(load_scale(table)) if exact_rungs else load_scale(table)
        if not names & {r.name for r in rungs}:
            raise AzhpcError(f"no match in {paths.ledger} against a rung of the {SCALE_NAME}: "
                             f"run azhpc evaluate {run_dir} --generation G --scale first")
        fitted = ladder_table(scale_fit(matches, rungs))
    else:
        if anchor not in names:
            raise AzhpcError(f"anchor '{anchor}' played no match in {paths.ledger}: evaluate a generation against it, "
                             f"or pass --anchor with one of {', '.join(sorted(names))}")
        fitted = ladder_table(fit_ratings(matches, anchor))
    if write:
        atomic.write_json(paths.ratings(adjudicate_material),
                          {"anchor": anchor if not on_scale else "scale", "scale": SCALE_NAME if on_scale else None,
                           "matches": len(entries), "adjudicate_material": adjudicate_material,
                           "ratings": [{"name": r.name, "elo": r.elo, "low": r.low, "high": r.high, "games": r.games} for r in fitted]},
                          doing="writing the ratings")
    return fitted, entries, on_scale


def player_label(name: str, entry: LedgerEntry, cfg: Config | None = None) -> str:
    """A network playing with another search than its run's own (``cfg``: eval.algorithm at eval.simulations) is
    another player in the ladder: ``gen:94@puct400``, ``gen:94@gumbel400``; engines, random and greedy keep their
    names. Without ``cfg`` only another algorithm, a prior temperature other than 1 and tree reuse count
    (ledger.search_tag)."""
    tag = search_tag(entry, cfg)
    return f"{name}@{tag}" if tag and name.startswith("gen:") else name


def generation_of(name: str) -> int | None:
    """The generation of a network that plays with its run's own search; None for anything else."""
    return int(name[4:]) if re.fullmatch(r"gen:\d+", name) else None
