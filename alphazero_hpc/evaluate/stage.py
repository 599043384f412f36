"""The evaluation stage of ``azhpc launch``: one network against ``eval.opponents`` and, with ``eval.scale``, rated
on the calibrated scale; every match in the run's ledger, progress in RUN/eval/gen-G/progress.json."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from ..errors import AzhpcError
from ..store import atomic
from ..store.paths import RunPaths
from ..store.progress import EvalProgress
from .runner import describe, evaluate
from .scale import rate_on_scale


def evaluate_generation(run_dir: Path, generation: int, device: str = "auto",
                        echo: Callable[[str], None] = print) -> EvalProgress:
    """The evaluation stage: generation G against every opponent of ``eval.opponents`` and, with ``eval.scale``, rated
    on the calibrated scale, all in the ledger.

    One opponent failing (Stockfish missing) is recorded and the others still play; progress goes to
    RUN/eval/gen-G/progress.json. A requeued or repeated stage finds finished matches in the ledger.
    """
    from ..config import split_opponents
    from ..store.runconfig import read_run_config

    paths = RunPaths(run_dir)
    cfg = read_run_config(paths)
    opponents = split_opponents(cfg.eval.opponents)
    progress = EvalProgress(generation, opponents)
    where = paths.eval_progress(generation)
    atomic.write_json(where, progress.to_json(), doing="writing evaluation progress")
    for spec in opponents:
        try:
            entry, _ = evaluate(run_dir, cfg, generation, spec, device=device)
            progress.results.append(describe(entry))
            echo(describe(entry))
        except AzhpcError as exc:
            progress.errors.append(f"{spec}: {exc}")
            echo(f"Error: {spec}: {exc}")
        progress.updated = time.time()
        atomic.write_json(where, progress.to_json(), doing="writing evaluation progress")
    if cfg.eval.scale:  # blocks already in the ledger count, so a requeued stage continues the rating
        try:
            rating = rate_on_scale(run_dir, cfg, generation, cfg.eval.scale_interval, max_games=cfg.eval.scale_max_games,
                                   device=device, echo=echo, jobs=cfg.eval.scale_jobs)
            progress.results.append(rating.line())
            echo(rating.line())
        except AzhpcError as exc:
            progress.errors.append(f"scale: {exc}")
            echo(f"Error: scale: {exc}")
        progress.updated = time.time()
        atomic.write_json(where, progress.to_json(), doing="writing evaluation progress")
    progress.status = "failed" if progress.errors else "done"
    atomic.write_json(where, progress.to_json(), doing="writing evaluation progress")
    return progress
