"""``azhpc elo``: one rating per evaluated player of a run, from every match in its ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..store import atomic
from ..errors import AzhpcError
from ..store.paths import RunPaths
from .elo import MatchScore, Rating, fit_ratings, ladder_table
from .ledger import read_ledger


def run_ladder(run_dir: Path, anchor: str = "random", adjudicate_material: int = 0,
               write: bool = True) -> tuple[list[Rating], list[dict[str, Any]]]:
    """Fit the ladder of a run (``anchor`` at Elo 0) over the matches scored with ``adjudicate_material``
    (0: chess rules only; matches scored differently are not mixed); with ``write`` (``azhpc elo``) store it in
    RUN/eval/ratings.json."""
    paths = RunPaths(run_dir)
    entries = [e for e in read_ledger(paths) if e.get("adjudicate_material", 0) == adjudicate_material]
    if not entries:
        raise AzhpcError(f"no evaluations in {paths.ledger}"
                         + (f" scored with adjudicate_material={adjudicate_material}" if adjudicate_material else "")
                         + f": run azhpc evaluate {run_dir} --generation G --opponent random first")
    names = {e["player"] for e in entries} | {e["opponent"] for e in entries}
    if anchor not in names:
        raise AzhpcError(f"anchor '{anchor}' played no match in {paths.ledger}: evaluate a generation against it, "
                         f"or pass --anchor with one of {', '.join(sorted(names))}")
    matches = [(e["player"], e["opponent"], MatchScore(e["wins"], e["draws"], e["losses"])) for e in entries]
    table = ladder_table(fit_ratings(matches, anchor))
    if write:
        atomic.write_json(paths.ratings(adjudicate_material),
                          {"anchor": anchor, "matches": len(entries), "adjudicate_material": adjudicate_material,
                           "ratings": [{"name": r.name, "elo": r.elo, "low": r.low, "high": r.high, "games": r.games} for r in table]},
                          doing="writing the ratings")
    return table, entries


def generation_of(name: str) -> int | None:
    return int(name[4:]) if name.startswith("gen:") else None
