"""One network against itself under two play settings: which search constants suit a network at play. Both sides
search with PUCT at the prior temperature ``--temperature`` (3, the documented setting) and ``--sims`` simulations
a move, each with its own overrides of the run's search (``--a``, ``--b``: ``c_init=1.8,fpu_reduction=0.5``; any
numeric field of ``mcts``, ``policy_temperature`` included). Games from the shipped book, each opening with both
colours, ``--start`` its first line; a game still going after 300 plies is a draw, and one drawn by repetition, the
fifty-move rule or that cap is a win for a side 3 pawns ahead (as the head-to-head tables of
docs/evaluation-log.md). Untimed: the load does not change the games, only their wall clock.

    python docs/calibration/play_ab.py docs/networks/learn-seed16 73 --b c_init=0.8 --out OUT.json
    python docs/calibration/play_ab.py --summary docs/calibration/play-ab-2026-12-07/*.json

The first line plays the match and writes OUT.json (every game's points for A, in the book's order); the second
prints each kept match's W/D/L from B's side, B's score and its Elo over A with a 95% interval. A head-to-head
gain overstates a gain against other engines (docs/evaluation-log.md): a setting that wins here is rated on the
scale before it is documented.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
import typing
from pathlib import Path

from alphazero_hpc.config import MCTSConfig, config_from_dict, parse_override, with_algorithm
from alphazero_hpc.errors import ConfigError
from alphazero_hpc.evaluate.elo import MatchScore, format_elo
from alphazero_hpc.evaluate.match import GameOutcome, book_openings, play_match
from alphazero_hpc.evaluate.players import NetPlayer
from alphazero_hpc.game.rules import search_rules
from alphazero_hpc.net.checkpoint import load_model
from alphazero_hpc.net.inference import TorchEvaluator
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.runconfig import read_run_config

MAX_PLIES = 300
ADJUDICATE = 3


def overrides(base: MCTSConfig, spec: str) -> MCTSConfig:
    """``base`` with the numeric fields of ``spec`` ("c_init=1.8,fpu_reduction=0.5") replaced, each value read and
    checked as ``--set mcts.KEY=VALUE`` reads and checks it."""
    hints = typing.get_type_hints(MCTSConfig)
    changes: dict[str, object] = {}
    for item in filter(None, spec.split(",")):
        _, key, value = parse_override(f"mcts.{item}")
        if hints.get(key) not in (float, int):
            raise SystemExit(f"play_ab.py: '{key}' is not a numeric field of mcts")
        changes[key] = value
    try:
        return config_from_dict({"mcts": {**dataclasses.asdict(base), **changes}}).mcts
    except ConfigError as exc:
        raise SystemExit(f"play_ab.py: {exc}") from exc


def b_result(matches: list[dict]) -> str:
    """B's W/D/L, score and Elo over A [95%] in the games of ``matches`` (kept matches, each A's points)."""
    s = MatchScore.from_points(1.0 - p for m in matches for p in m["a_points"])
    elo = s.summary()
    return (f"+{s.wins} ={s.draws} -{s.losses}, score {s.score:.3f}, Elo {format_elo(elo['elo'], s.score)} "
            f"[{format_elo(elo['elo_low'], 0.0)}, {format_elo(elo['elo_high'], 1.0)}]")


def summary_line(path: Path) -> str:
    """One kept match: B's W/D/L, score and Elo over A [95%]."""
    kept = json.loads(path.read_text())
    return (f"{path.name}: {kept['run']} gen {kept['generation']}, {kept['simulations']} simulations, T={kept['temperature']:g}"
            f"{', tree reuse' if kept['tree_reuse'] else ''}: B ({kept['b'] or 'as A'}) against A ({kept['a'] or 'the documented setting'}) "
            + b_result([kept]))


def pooled_lines(paths: list[Path]) -> list[str]:
    """One line per B setting kept for more than one network: its games pooled, B's side."""
    by_b: dict[tuple[str, int, float], list[dict]] = {}
    for path in paths:
        kept = json.loads(path.read_text())
        by_b.setdefault((kept["b"], kept["simulations"], kept["temperature"]), []).append(kept)
    lines = []
    for (b, sims, temperature), matches in by_b.items():
        if len({(m["run"], m["generation"]) for m in matches}) < 2:
            continue
        lines.append(f"pooled, {len(matches)} networks, {sims} simulations, T={temperature:g}: B ({b}) " + b_result(matches))
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", nargs="?", help="run folder (its config.yaml and models/)")
    p.add_argument("generation", nargs="?", type=int)
    p.add_argument("--sims", type=int, default=400, help="simulations a move, both sides [400]")
    p.add_argument("--temperature", type=float, default=3.0, help="the prior's temperature, both sides [3]")
    p.add_argument("--games", type=int, default=60, help="games, played at once [60]")
    p.add_argument("--start", type=int, default=0, help="first line of the book [0]")
    p.add_argument("--a", default="", help="A's overrides of mcts, e.g. c_init=1.25 ['': the run's]")
    p.add_argument("--b", default="", help="B's overrides of mcts, e.g. c_init=0.8")
    p.add_argument("--reuse", action="store_true", help="each side keeps its game's tree between moves")
    p.add_argument("--out", type=Path, help="where the match is kept (JSON)")
    p.add_argument("--summary", nargs="+", type=Path, help="print kept matches' results instead of playing")
    args = p.parse_args()
    if args.summary:
        for path in args.summary:
            print(summary_line(path))
        for line in pooled_lines(args.summary):
            print(line)
        return
    if args.run is None or args.generation is None or args.out is None:
        raise SystemExit("play_ab.py: give RUN GENERATION --out OUT.json (or --summary FILES)")
    paths = RunPaths(Path(args.run))
    cfg = read_run_config(paths)
    base = dataclasses.replace(with_algorithm(cfg.play_mcts(), "puct"), policy_temperature=args.temperature)
    model, _ = load_model(paths.model(args.generation), expect=cfg.model)
    evaluator = TorchEvaluator(model, "cpu", cfg.mcts.precision, cfg.mcts.channels_last)
    rules = search_rules(MAX_PLIES + 2, cfg.mcts.mate_in_one)
    a = NetPlayer(evaluator, overrides(base, args.a), args.sims, rules, f"A:{args.a}", args.reuse)
    b = NetPlayer(evaluator, overrides(base, args.b), args.sims, rules, f"B:{args.b}", args.reuse)
    book = book_openings()
    book = book[args.start % len(book):] + book[:args.start % len(book)]
    started = time.time()
    ended: list[float] = []

    def on_game(outcome: GameOutcome) -> None:
        ended.append(1.0 - outcome.first_points)
        s = MatchScore.from_points(ended)
        print(f"{s.games}/{args.games}: B +{s.wins} ={s.draws} -{s.losses}, score {s.score:.3f} "
              f"({time.time() - started:.0f} s)", flush=True)

    games = play_match(a, b, args.games, book, MAX_PLIES, parallel=args.games, adjudicate_material=ADJUDICATE,
                       on_game=on_game)
    args.out.write_text(json.dumps({
        "run": str(args.run), "generation": args.generation, "simulations": args.sims, "temperature": args.temperature,
        "tree_reuse": args.reuse, "a": args.a, "b": args.b, "start": args.start, "max_plies": MAX_PLIES,
        "adjudicate_material": ADJUDICATE, "a_points": [g.first_points for g in games],
        "seconds": round(time.time() - started)}) + "\n")
    print(summary_line(args.out))


if __name__ == "__main__":
    main()
