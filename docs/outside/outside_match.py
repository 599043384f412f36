#!/usr/bin/env python3
"""A match between two UCI engines run the way an outside rater would: python-chess and the standard library only.

Nothing of alphazero_hpc is imported: the network plays through ``azhpc uci`` like any UCI engine, the openings are
this script's own (seeded random plies, each opening once with each colour, not the package's book), and a game is
scored by the rules alone (mate, stalemate, insufficient material, a threefold repetition or fifty moves once they
have occurred, a draw after --max-plies; no material adjudication). It checks that a rating printed by
``azhpc evaluate --scale`` holds outside the package's own match runner (docs/evaluation-log.md, "Checked outside the
match runner").

    python docs/outside/outside_match.py \\
        --engine "azhpc uci --checkpoint RUN/models/gen-0080.pt --search puct --simulations 800 --policy-temperature 3 --tree-reuse" \\
        --engine-nodes 800 --opponent fairy-stockfish --opponent-option "Skill Level=-2" --opponent-depth 1 \\
        --opponent-rating 1054 --games 40 --jobs 2 --pgn scratch/outside.pgn --json scratch/outside.json

Each job is a process with its own two engines; every game's result is printed as it ends, and with ``--pgn`` the
game is in that file at once (rewritten whole, through a temporary file and a rename, so a kill never leaves half a
game). Started again with the same ``--pgn`` and settings, the match plays only the games missing from it: a match
stopped or killed loses only the games in flight, and a larger ``--games`` extends a finished one. A PGN of another
match (any setting but ``--games``, ``--jobs``, ``--json`` and ``--opponent-rating`` differs) is refused, not mixed in. Two rungs of the scale
play each other the same way (the rungs' differences checked outside the package's calibration): the first engine
at ``--engine-depth 1`` with its options, e.g. ``--engine stockfish --engine-option "Skill Level=0" --engine-option
Threads=1 --engine-option Hash=16 --engine-depth 1``; a rung on a clock with ``--engine-tc 60+0.6`` (the anchor:
``--engine-option UCI_LimitStrength=true --engine-option UCI_Elo=1350``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import os
import queue as queues
import random
import shlex
import shutil
import signal
import sys
import time

import chess
import chess.engine
import chess.pgn


def book_opening(index: int, path: str) -> chess.Board:
    """Opening ``index`` of a book file, cycling: one opening a line, ``Name: SAN moves`` from the start, ``#``
    starting a comment (the format of the package's evaluate/openings.txt, read here with python-chess alone)."""
    lines = [line.split("#", 1)[0].strip() for line in open(path)]
    lines = [line for line in lines if line]
    if not lines:
        raise ValueError(f"{path}: no openings")
    board = chess.Board()
    for san in lines[index % len(lines)].partition(":")[2].split():
        board.push_san(san)
    return board


def opening(index: int, plies: int, seed: int) -> chess.Board:
    """Opening ``index``: ``plies`` uniformly random legal moves from the start, drawn again until the position is
    still a game (seeded, so every job and every rerun gets the same openings)."""
    rng = random.Random(f"{seed}:{index}")
    while True:
        board = chess.Board()
        for _ in range(plies):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        if not board.is_game_over(claim_draw=True):
            return board


def command(line: str) -> list[str]:
    """The engine's argv; a bare name not on PATH is also looked for in /usr/games, where Debian puts the engines."""
    argv = shlex.split(line)
    if argv and os.sep not in argv[0] and shutil.which(argv[0]) is None and os.path.exists(f"/usr/games/{argv[0]}"):
        argv[0] = f"/usr/games/{argv[0]}"
    return argv


def configure(engine: chess.engine.SimpleEngine, options: list[str]) -> None:
    values: dict[str, str | int | bool | None] = {}
    for item in options:
        name, _, value = item.partition("=")
        values[name.strip()] = value.strip()
    if values:
        engine.configure(values)


def ending(board: chess.Board, max_plies: int) -> tuple[str, str] | None:
    """(result, termination) once the game is over, as cutechess-cli adjudicates it: mate, stalemate, insufficient
    material, and a draw once a position has occurred three times, after fifty moves without a capture or a pawn move,
    or after ``max_plies``. Not python-chess's ``claim_draw=True``: that also ends the game when the side to move
    *could* repeat a position a third time, whoever is winning, which ended hundreds of engine games early as draws."""
    outcome = board.outcome()
    if outcome is not None:
        return outcome.result(), outcome.termination.name.lower()
    if board.is_repetition(3):
        return "1/2-1/2", "threefold_repetition"
    if board.halfmove_clock >= 100:
        return "1/2-1/2", "fifty_moves"
    if board.ply() >= max_plies:
        return "1/2-1/2", f"{max_plies} plies"
    return None


def clock(text: str | None) -> tuple[float, float] | None:
    """``BASE+INC`` in seconds (``60+0.6``) as (base, increment); None for no clock."""
    if not text:
        return None
    base, _, inc = text.partition("+")
    return float(base), float(inc or 0)


def play_game(index: int, args: argparse.Namespace, net: chess.engine.SimpleEngine,
              opp: chess.engine.SimpleEngine) -> tuple[int, str, chess.pgn.Game]:
    """Game ``index``: opening ``index // 2``, the network White when ``index`` is even. A side on a clock
    (``--engine-tc``, ``--opponent-tc``) gets its remaining time and increment with each ``go``; the wall time around
    its answer is taken off, the increment added, and a side whose time ran out loses (as a GUI scores it)."""
    board = book_opening(index // 2, args.book) if args.book else opening(index // 2, args.random_plies, args.seed)
    net_white = index % 2 == 0
    tcs = {True: clock(args.engine_tc), False: clock(args.opponent_tc)}  # keyed by "the network's side"
    left = {side: tc[0] for side, tc in tcs.items() if tc}
    limits = {True: (chess.engine.Limit(depth=args.engine_depth) if args.engine_depth else
                     chess.engine.Limit(nodes=args.engine_nodes) if args.engine_nodes else
                     chess.engine.Limit(time=args.engine_movetime)),
              False: chess.engine.Limit(depth=args.opponent_depth) if args.opponent_depth else chess.engine.Limit(nodes=args.opponent_nodes)}
    game_key = object()  # a new object each game: python-chess sends ucinewgame to both engines
    flagged = None
    while ending(board, args.max_plies) is None:
        net_to_move = (board.turn == chess.WHITE) == net_white
        limit, tc = limits[net_to_move], tcs[net_to_move]
        if tc:  # the other side's clock: its own if it has one, else this side's (an untimed opponent)
            mine, other = left[net_to_move], left.get(not net_to_move, left[net_to_move])
            white, black = (mine, other) if board.turn == chess.WHITE else (other, mine)
            limit = chess.engine.Limit(white_clock=white, black_clock=black, white_inc=tc[1], black_inc=tc[1])
        started = time.monotonic()
        result = (net if net_to_move else opp).play(board, limit, game=game_key)
        if tc:
            left[net_to_move] -= time.monotonic() - started
            if left[net_to_move] < 0:
                flagged = board.turn
                break
            left[net_to_move] += tc[1]
        if result.move is None or result.move not in board.legal_moves:
            raise RuntimeError(f"game {index}: {'network' if net_to_move else 'opponent'} answered {result.move} "
                               f"in {board.fen()}")
        board.push(result.move)
    if flagged is not None:  # lost on time (a draw if the winner could not mate is left out: engines rarely flag)
        text, termination = ("0-1" if flagged == chess.WHITE else "1-0"), "time forfeit"
    else:
        text, termination = ending(board, args.max_plies) or ("*", "")
    game = chess.pgn.Game.from_board(board)
    game.headers["Event"] = "outside_match.py"
    game.headers["Round"] = str(index + 1)
    game.headers["White"], game.headers["Black"] = ("network", "opponent") if net_white else ("opponent", "network")
    game.headers["Result"] = text
    game.headers["Termination"] = termination
    if any(tcs.values()):
        game.headers["TimeControl"] = "/".join(f"{side}={tc[0]:g}+{tc[1]:g}" for side, tc in
                                               (("network", tcs[True]), ("opponent", tcs[False])) if tc)
    return index, letter(game), game


# the settings that make a game part of one match (every one but --games, --jobs, the output files and the rating)
MATCH_SETTINGS = ("engine", "engine_option", "engine_depth", "engine_nodes", "engine_movetime", "engine_tc", "opponent",
                  "opponent_option", "opponent_depth", "opponent_nodes", "opponent_tc", "random_plies", "book",
                  "max_plies", "seed")


def match_id(args: argparse.Namespace) -> str:
    """A short digest of the match's settings, written into every game's PGN headers (``Match``)."""
    text = json.dumps({k: getattr(args, k) for k in MATCH_SETTINGS}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def letter(game: chess.pgn.Game) -> str:
    """The network's result in ``game`` as W, D or L."""
    points = {"1-0": 1.0, "0-1": 0.0}.get(game.headers["Result"], 0.5)
    if game.headers["White"] != "network":
        points = 1.0 - points
    return {1.0: "W", 0.5: "D", 0.0: "L"}[points]


def played(path: str | None, match: str) -> dict[int, tuple[str, str]]:
    """The games of this match already in the PGN at ``path``, by index: (the network's result, the game's PGN).
    Raises ValueError naming the file when it holds a game of another match or one this script did not write."""
    results: dict[int, tuple[str, str]] = {}
    if not path or not os.path.exists(path):
        return results
    with open(path) as f:
        while (game := chess.pgn.read_game(f)) is not None:
            h = game.headers
            if h.get("Event") != "outside_match.py" or h.get("Result") not in ("1-0", "0-1", "1/2-1/2"):
                raise ValueError(f"{path}: game {len(results) + 1} was not written by this script (Event "
                                 f"{h.get('Event')!r}, Result {h.get('Result')!r}); pass a new --pgn")
            if h.get("Match") != match:
                raise ValueError(f"{path}: game {h.get('Round')} is from a match with other settings (Match "
                                 f"{h.get('Match')}, these settings {match}); rerun with that match's settings or "
                                 f"pass a new --pgn")
            results[int(h["Round"]) - 1] = (letter(game), str(game))
    return results


def write_pgn(path: str, results: dict[int, tuple[str, str]]) -> None:
    """Every finished game, in order, replacing ``path`` whole (a temporary file renamed over it)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write("\n\n".join(results[i][1] for i in sorted(results)) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def worker(job: int, args: argparse.Namespace, indexes: list[int],
           queue: "multiprocessing.Queue[tuple[int, str, str] | str]") -> None:
    os.environ.setdefault("AZHPC_TORCH_THREADS", "1")  # one core per job for the network's engine
    engines: list[chess.engine.SimpleEngine] = []
    try:
        net = chess.engine.SimpleEngine.popen_uci(command(args.engine))
        engines.append(net)
        opp = chess.engine.SimpleEngine.popen_uci(command(args.opponent))
        engines.append(opp)
        configure(net, args.engine_option)
        configure(opp, ["Threads=1", "Hash=16", *args.opponent_option])
        for index in indexes:
            i, result, game = play_game(index, args, net, opp)
            game.headers["Match"] = match_id(args)
            queue.put((i, result, str(game)))
    except Exception as exc:  # reported by the parent as one line; the games already played count
        queue.put(f"job {job}: {type(exc).__name__}: {exc}")
    finally:
        for engine in engines:
            engine.quit()


def elo(score: float) -> float:
    if score <= 0:
        return -math.inf
    if score >= 1:
        return math.inf
    return -400 * math.log10(1 / score - 1)


def summary(letters: list[str]) -> dict[str, float | int]:
    """W/D/L, score, Elo difference and its 95% interval from the three outcomes' variance (as cutechess prints)."""
    w, d, l = (letters.count(c) for c in "WDL")
    n = w + d + l
    mu = (w + d / 2) / n
    var = (w * (1 - mu) ** 2 + d * (0.5 - mu) ** 2 + l * mu ** 2) / n
    z = 1.96
    if var > 0:
        low, high = mu - z * math.sqrt(var / n), mu + z * math.sqrt(var / n)
    else:  # every game the same result: Wilson's score interval, not a point
        centre, spread = (mu + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(mu * (1 - mu) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        low, high = (0.0 if mu == 0 else centre - spread), (1.0 if mu == 1 else centre + spread)  # no rounding off 0 or 1
    return {"wins": w, "draws": d, "losses": l, "games": n, "score": mu, "elo": elo(mu),
            "elo_low": elo(max(low, 0.0)), "elo_high": elo(min(high, 1.0))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", required=True, help="the network's UCI command line")
    p.add_argument("--engine-option", action="append", default=[], help="NAME=VALUE, repeatable")
    p.add_argument("--engine-depth", type=int, default=0, help="go depth N for the first engine (an engine rung; 0: --engine-nodes)")
    p.add_argument("--engine-nodes", type=int, default=800, help="go nodes N for the network (0: --engine-movetime)")
    p.add_argument("--engine-movetime", type=float, default=2.0, help="seconds a move when --engine-nodes is 0")
    p.add_argument("--engine-tc", help="BASE+INC seconds: the first engine on a real clock (e.g. 60+0.6; replaces its depth/nodes)")
    p.add_argument("--opponent", default="fairy-stockfish", help="the opponent's UCI command line")
    p.add_argument("--opponent-option", action="append", default=[], help="NAME=VALUE, repeatable (Threads=1 and Hash=16 are set)")
    p.add_argument("--opponent-depth", type=int, default=1)
    p.add_argument("--opponent-nodes", type=int, default=0, help="go nodes N when --opponent-depth is 0")
    p.add_argument("--opponent-tc", help="BASE+INC seconds: the opponent on a real clock (replaces its depth/nodes)")
    p.add_argument("--opponent-rating", type=float, help="the opponent's rating: also print the network's implied rating")
    p.add_argument("--games", type=int, default=40)
    p.add_argument("--random-plies", type=int, default=6)
    p.add_argument("--book", help="openings from this file instead of random plies (Name: SAN moves, a line each)")
    p.add_argument("--max-plies", type=int, default=400)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--pgn", help="write every game here")
    p.add_argument("--json", help="write the summary here")
    args = p.parse_args()

    # Ctrl-C, kill -INT or kill -TERM stops the match with its finished games, also when it was started in the
    # background (`nohup ... &`), where the shell hands it SIGINT ignored and Python keeps it so.
    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    match = match_id(args)
    try:
        results = played(args.pgn, match)
    except (ValueError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    resumed = sum(1 for i in results if i < args.games)
    beyond = len(results) - resumed  # games of a larger --games before: kept in the PGN, not counted in this summary
    todo = [i for i in range(args.games) if i not in results]
    if resumed:
        print(f"{args.pgn}: {resumed} games of this match already played; playing the {len(todo)} missing", flush=True)
    if beyond:
        print(f"{args.pgn}: {beyond} more games of this match (beyond --games {args.games}) stay in it and are not "
              "counted here", flush=True)
    spawn = multiprocessing.get_context("spawn")  # each job starts its engines in a fresh process
    queue: multiprocessing.Queue[tuple[int, str, str] | str] = spawn.Queue()
    procs = [spawn.Process(target=worker, args=(j, args, todo[j::args.jobs], queue))
             for j in range(min(args.jobs, len(todo)))]
    started = time.monotonic()
    for proc in procs:
        proc.start()
    failures: list[str] = []
    stopped = False
    try:
        while any(i not in results for i in todo) and (any(p.is_alive() for p in procs) or not queue.empty()):
            try:
                item = queue.get(timeout=5)
            except queues.Empty:
                continue
            if isinstance(item, str):
                failures.append(item)
                print(item, file=sys.stderr, flush=True)
                continue
            index, result, pgn = item
            results[index] = (result, pgn)
            if args.pgn:
                write_pgn(args.pgn, results)
            s = summary([r[0] for r in results.values()])
            print(f"game {index + 1}: {result}  ({s['wins']}-{s['draws']}-{s['losses']} after {s['games']}, "
                  f"{time.monotonic() - started:.0f} s)", flush=True)
    except KeyboardInterrupt:  # Ctrl-C, kill -INT or -TERM: the finished games still count, the ones in flight are lost
        stopped = True
        again = " (the same command again plays them)" if args.pgn else ""
        print(f"stopped after {len(results)} games; the games in flight are lost{again}", file=sys.stderr, flush=True)
        for proc in procs:
            proc.terminate()
    for proc in procs:
        proc.join()
    counted = sorted(i for i in results if i < args.games)
    if not counted:
        print("no game finished", file=sys.stderr)
        return 1
    s = summary([results[i][0] for i in counted])
    line = (f"network {s['wins']}-{s['draws']}-{s['losses']} in {s['games']} games, score {s['score']:.3f}, "
            f"Elo difference {s['elo']:+.0f} [95% {s['elo_low']:+.0f}, {s['elo_high']:+.0f}]")
    if args.opponent_rating is not None:
        s["opponent_rating"] = args.opponent_rating
        s["rating"], s["rating_low"], s["rating_high"] = (args.opponent_rating + s[k] for k in ("elo", "elo_low", "elo_high"))
        line += f"; with the opponent at {args.opponent_rating:.0f}: {s['rating']:.0f} [{s['rating_low']:.0f}, {s['rating_high']:.0f}]"
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**s, "args": vars(args), "match": match, "resumed": resumed, "failures": failures,
                       "stopped": stopped}, f, indent=1)
    return 1 if failures or stopped else 0


if __name__ == "__main__":
    sys.exit(main())
