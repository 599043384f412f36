"""Does the opening set move the anchor's score against a rung? The package's calibration plays its 24-line book; the
outside checks (docs/outside/outside_match.py) drew random 6-ply openings and scored the anchor higher against the
same rungs. This plays the same pair with the package's own runner (``play_recorded``, the calibration's block size,
clock and ply cap) from random openings instead, into OUT's ledger, so that the runner is held fixed and only the
openings change; it then prints the score beside the book games' from the shipped table.

    python docs/calibration/openings_check.py OUT --blocks 4 --task 0 --tasks 2 &
    python docs/calibration/openings_check.py OUT --blocks 4 --task 1 --tasks 2; wait
    python docs/calibration/openings_check.py OUT --blocks 4 --summary

``--parallel 1`` plays each block's games one after another (the package's runner otherwise plays a block's games
at once, each engine answering every game in turn from one process, so its hash and search state carry from game
to game; an outside runner plays one game at a time): with ``--openings book:0`` it holds the openings fixed and
changes only that.

Block b is seed b (each 10-game block draws its own five openings, each played with both colours). Started again it
plays only the blocks missing from OUT's ledger. The 40 games of 2026-12-04 are kept in
docs/calibration/openings-check-2026-12-04.jsonl: copy it to OUT/eval/ledger.jsonl to summarise them again. The
anchor is on a clock: run it on a quiet machine. The summary counts only games between the scale's rungs.
"""

import argparse
from collections.abc import Iterable
from pathlib import Path

from alphazero_hpc.config import load_config
from alphazero_hpc.evaluate.elo import MatchScore
from alphazero_hpc.evaluate.runner import MatchPlan, play_recorded
from alphazero_hpc.evaluate.ledger import PlaySetup, read_ledger
from alphazero_hpc.evaluate.scale import MAX_PLIES, read_table, rung_matches, table_matches
from alphazero_hpc.store.paths import RunPaths

ANCHOR = "stockfish:elo=1350,tc=60+0.6"


def plans(rung: str, blocks: int, games: int, openings: str) -> list[MatchPlan]:
    return [MatchPlan(ANCHOR, rung, games, PlaySetup(0), openings, b, MAX_PLIES) for b in range(blocks)]


def against(matches: Iterable[tuple[str, str, MatchScore]], rung: str) -> MatchScore:
    """The anchor's total score against ``rung`` over ``matches`` (either side first)."""
    mine = [s if a == ANCHOR else MatchScore(s.losses, s.draws, s.wins) for a, b, s in matches if {a, b} == {ANCHOR, rung}]
    return MatchScore(sum(s.wins for s in mine), sum(s.draws for s in mine), sum(s.losses for s in mine))


def summary(out: Path, rung: str, openings: str) -> None:
    score = against(rung_matches(e for e in read_ledger(RunPaths(out)) if e["openings"] == openings), rung)
    ref = against(table_matches(read_table()), rung)
    for label, s in ((f"{openings}, this ledger", score), ("book, the shipped table's games", ref)):
        if s.games:
            low, high = s.elo_interval()
            print(f"anchor vs {rung}, {label}: +{s.wins} ={s.draws} -{s.losses} in {s.games}, score "
                  f"{s.score:.3f}, {s.elo:+.0f} [{low:+.0f}, {high:+.0f}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--rung", default="stockfish:skill=0,depth=1")
    ap.add_argument("--openings", default="random:6")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--games", type=int, default=10)
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--tasks", type=int, default=1)
    ap.add_argument("--parallel", type=int, help="games of a block played at once (default: eval.parallel's)")
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args()
    if not args.summary:
        cfg = load_config(None, [] if args.parallel is None else [f"eval.parallel={args.parallel}"])
        paths = RunPaths(args.out)
        paths.eval_dir.mkdir(parents=True, exist_ok=True)
        for plan in plans(args.rung, args.blocks, args.games, args.openings)[args.task::args.tasks]:
            entry, now = play_recorded(paths, cfg, plan, "cpu")
            print(f"[task {args.task}] block {plan.seed}: +{entry['wins']} ={entry['draws']} -{entry['losses']}"
                  f" ({entry['seconds']} s{'' if now else ', already in the ledger'})", flush=True)
    summary(args.out, args.rung, args.openings)


if __name__ == "__main__":
    main()
