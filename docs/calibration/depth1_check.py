"""Does sharing one engine process among a block's games move the depth-1 rungs? The package's runner gives an engine
a process per game only when its search goes beyond depth 1 (``engines.plays_per_game``); every rung below the anchor
is at depth 1 and still answers all of a block's games, interleaved, from one process whose hash and history tables
carry from game to game. This plays one pair of depth-1 rungs both ways with the package's runner (``play_recorded``,
the calibration's 20-game blocks from its book, the 400-ply cap), into OUT/shared and OUT/per-game, and prints the
two scores and their difference.

    python docs/calibration/depth1_check.py OUT --arm shared --blocks 50 &
    python docs/calibration/depth1_check.py OUT --arm per-game --blocks 50; wait
    python docs/calibration/depth1_check.py OUT --summary

Block b is seed b and starts the book at line 10 b (mod 24), both arms alike. Started again it plays only the blocks
missing from the arm's ledger. Untimed: the load does not change the games. The 2,000 games of 2026-12-04 are kept in
docs/calibration/depth1-check-2026-12-04-shared.jsonl and -per-game.jsonl: copy them to OUT/shared/eval/ledger.jsonl
and OUT/per-game/eval/ledger.jsonl to summarise them again.
"""
import argparse
from pathlib import Path

from alphazero_hpc.config import Config
from alphazero_hpc.evaluate.elo import MatchScore
from alphazero_hpc.evaluate.ledger import PlaySetup, read_ledger
from alphazero_hpc.evaluate.match import book_openings
from alphazero_hpc.evaluate.runner import MatchPlan, play_recorded
from alphazero_hpc.evaluate.scale import MAX_PLIES
from alphazero_hpc.store.paths import RunPaths

ARMS = ("shared", "per-game")


def plans(player: str, opponent: str, blocks: int, games: int, per_game: bool) -> list[MatchPlan]:
    """``per_game``: every engine, depth 1 too, gets a process per game (the blocks' keys end in ``|engine_per_game``)."""
    book = len(book_openings())
    return [MatchPlan(player, opponent, games, PlaySetup(0), f"book:{(b * games // 2) % book}", b, MAX_PLIES,
                      every_engine_per_game=per_game)
            for b in range(blocks)]


def total(out: Path, arm: str, player: str, opponent: str) -> MatchScore:
    paths = RunPaths(out / arm)
    mine = [e for e in (read_ledger(paths) if paths.ledger.exists() else [])
            if (e["player"], e["opponent"]) == (player, opponent)]
    return MatchScore(sum(e["wins"] for e in mine), sum(e["draws"] for e in mine), sum(e["losses"] for e in mine))


def summary(out: Path, player: str, opponent: str) -> None:
    scores = {arm: total(out, arm, player, opponent) for arm in ARMS}
    for arm, s in scores.items():
        if s.games:
            low, high = s.elo_interval()
            print(f"{arm:>8}: {player} vs {opponent}: +{s.wins} ={s.draws} -{s.losses} in {s.games}, score "
                  f"{s.score:.3f}, {s.elo:+.0f} [{low:+.0f}, {high:+.0f}]")
    a, b = scores["shared"], scores["per-game"]
    if a.games and b.games:
        se = (a.score_variance / a.games + b.score_variance / b.games) ** 0.5
        diff = b.score - a.score
        print(f"per-game minus shared: {diff:+.3f} in score ({diff / se:+.1f} standard errors; +-{1.96 * se:.3f} at 95%)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--player", default="stockfish:skill=0,depth=1")
    ap.add_argument("--opponent", default="fairy-stockfish:skill=-1,depth=1")
    ap.add_argument("--arm", choices=ARMS, default="shared")
    ap.add_argument("--blocks", type=int, default=50)
    ap.add_argument("--games", type=int, default=20)
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args()
    if not args.summary:
        paths = RunPaths(args.out / args.arm)
        paths.eval_dir.mkdir(parents=True, exist_ok=True)
        for plan in plans(args.player, args.opponent, args.blocks, args.games, args.arm == "per-game"):
            entry, now = play_recorded(paths, Config(), plan, "cpu")
            print(f"[{args.arm}] block {plan.seed}: +{entry['wins']} ={entry['draws']} -{entry['losses']}"
                  f" ({entry['seconds']} s{'' if now else ', already in the ledger'})", flush=True)
    summary(args.out, args.player, args.opponent)


if __name__ == "__main__":
    main()
