"""``azhpc bench import-pgn``: the import's positions/s against python-chess's own parse rate of the same file.

Both read the whole input in the same process, alternating, ``repeats`` times each: python-chess's parse is
``chess.pgn.read_game`` with its default visitor (a game tree, every move checked and pushed); the import is
``azhpc import-pgn``'s task (parse with the row visitor, encode, write and fsync the shards and sidecars, into
a temporary run folder). The headline is the ratio of the medians: 1.0 means the import costs what parsing
costs, and no less is possible since the import parses.
"""

from __future__ import annotations

import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import chess.pgn

from ..pgn.source import open_pgn
from ..pgn.task import ImportSpec, run_import_task

if TYPE_CHECKING:
    from ..evaluate.ledger import LedgerEntry


def parse_rate(files: Sequence[Path]) -> tuple[int, float]:
    """(mainline positions, seconds) of parsing every game of ``files`` with python-chess alone."""
    positions = 0
    t0 = time.perf_counter()
    for path in files:
        with open_pgn(path) as handle:
            while (game := chess.pgn.read_game(handle)) is not None:
                positions += sum(1 for _ in game.mainline_moves())
    return positions, time.perf_counter() - t0


def import_rate(files: Sequence[Path], config: str | Path | None, overrides: Sequence[str]) -> tuple[int, float]:
    """(positions written, seconds) of importing ``files`` as one task into a temporary run folder."""
    with tempfile.TemporaryDirectory(prefix="azhpc-bench-import-") as tmp:
        t0 = time.perf_counter()
        p = run_import_task(Path(tmp) / "run", ImportSpec.of(files), 0, config, overrides)
        return p.positions, time.perf_counter() - t0


def bench_import(files: Sequence[Path], config: str | Path | None = None, overrides: Sequence[str] = (),
                 repeats: int = 3) -> dict:
    parse, imp = [], []
    parsed = imported = 0
    for _ in range(repeats):  # alternating: a busy moment of a shared machine hits both
        parsed, s = parse_rate(files)
        parse.append(parsed / s)
        imported, s = import_rate(files, config, overrides)
        imp.append(imported / s)
    return {"files": [str(f) for f in files], "repeats": repeats, "positions_parsed": parsed,
            "positions_imported": imported, "parse_positions_per_s": parse, "import_positions_per_s": imp,
            "parse_median": statistics.median(parse), "import_median": statistics.median(imp),
            "import_over_parse": statistics.median(imp) / statistics.median(parse)}


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have been waited for (Stockfish, pretraining)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def learning_check(out: Path, stockfish: str, games: int = 1600, depth: int = 2, config: str | Path | None = None,
                   overrides: Sequence[str] = (), eval_games: int = 40, simulations: int = 0,
                   opponents: Sequence[str] = ("random", "greedy"), workers: int = 1, echo=print) -> list[LedgerEntry]:
    """Stockfish games -> import -> pretraining -> matches: does a network trained only on imported games beat
    random and greedy under the rules of chess? Every step is skipped when its output exists (started again, it
    continues); the matches go into ``OUT/run/eval/ledger.jsonl``. Returns their ledger entries."""
    import os
    import subprocess
    import sys

    from ..errors import AzhpcError
    from ..evaluate.runner import describe, evaluate
    from ..store.paths import RunPaths
    from ..store.runconfig import read_run_config
    from .sfgames import write_stockfish_pgn

    out.mkdir(parents=True, exist_ok=True)
    pgn = out / f"stockfish-d{depth}-{games}.pgn"
    if not pgn.exists():
        t0, c0 = time.perf_counter(), cpu_seconds()
        write_stockfish_pgn(pgn, stockfish, games, seed=0, depth=depth, workers=workers)
        echo(f"{games} Stockfish depth-{depth} games in {time.perf_counter() - t0:.0f} s, {cpu_seconds() - c0:.0f} CPU s -> {pgn}")
    run = RunPaths(out / "run")
    c0 = cpu_seconds()
    p = run_import_task(run.root, ImportSpec.of([pgn]), 0, config, overrides)
    echo(f"imported {p.games} games, {p.positions} positions ({cpu_seconds() - c0:.0f} CPU s)")
    if not run.model(0).exists():
        t0, c0 = time.perf_counter(), cpu_seconds()
        done = subprocess.run([sys.executable, "-m", "alphazero_hpc.train", "--run-dir", str(run.root), "--generation", "-1"],
                              env={**os.environ, "OMP_NUM_THREADS": str(max(1, workers))}, capture_output=True, text=True)
        if done.returncode != 0:
            raise AzhpcError(f"pretraining failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        echo(f"pretrained generation 0 in {time.perf_counter() - t0:.0f} s, {cpu_seconds() - c0:.0f} CPU s -> {run.model(0)}")
    cfg = read_run_config(run)
    entries = []
    for opponent in opponents:
        entry, _ = evaluate(run.root, cfg, 0, opponent, eval_games, simulations or None, adjudicate_material=0)
        echo(describe(entry))
        entries.append(entry)
    return entries
