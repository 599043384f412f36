"""azhpc import-pgn: PGN (made here by Stockfish) into shards encoded exactly as self-play's; filters, bad input,
compression, tasks, resuming after a kill, and pretraining generation 0 on the result."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import chess
import chess.engine
import chess.pgn
import h5py
import numpy as np
import pytest

from alphazero_hpc.game.encoding import batch_from_chains, chain_for_board, move_index
from alphazero_hpc.pgn.rows import GameFilter, speed_of
from alphazero_hpc.pgn.source import PgnFileError, open_pgn
from alphazero_hpc.pgn.task import ImportSpec, run_import_task
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.shards import read_shard, read_sidecar

from .conftest import ROOT, TINY, run_cli, slurm_cli, user_jobs
from .pgn_games import stockfish_games, write_pgn

HISTORY = 2  # configs/tiny.yaml
ILLEGAL = '[Event "broken"]\n[Result "1-0"]\n\n1. e4 e5 2. Ke3 Nc6 1-0\n\n'
CHESS960 = '[Event "960"]\n[Variant "Chess960"]\n[FEN "bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9"]\n[Result "1-0"]\n\n9. g3 1-0\n\n'
NO_RESULT = '[Event "unfinished"]\n[Result "*"]\n\n1. d4 d5 *\n\n'


@pytest.fixture(scope="module")
def games(request):
    from alphazero_hpc.errors import AzhpcError
    from alphazero_hpc.evaluate.engines import find_stockfish

    try:
        sf = find_stockfish()
    except AzhpcError as exc:
        if os.environ.get("AZHPC_REQUIRE_STOCKFISH") == "1" or os.environ.get("CI"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    return stockfish_games(sf, 30, seed=1)


@pytest.fixture
def pgn(tmp_path, games) -> Path:
    """30 Stockfish games, then a game with an illegal move, a Chess960 game and an unfinished one."""
    return write_pgn(tmp_path / "games.pgn", games, ILLEGAL + CHESS960 + NO_RESULT)


def _import(run: Path, files, tasks: int = 1, task: int = 0, max_games: int = 0, flt: GameFilter = GameFilter(), **kw):
    return run_import_task(run, ImportSpec.of(files, tasks, max_games, flt, games_per_shard=4), task, config_path=TINY, **kw)


def _digest(run: Path) -> dict[str, str]:
    """Every imported shard's datasets and every sidecar, by name."""
    out = {}
    paths = RunPaths(run)
    for task in paths.import_tasks():
        for shard in paths.import_complete_shards(task):
            h = hashlib.sha256()
            with h5py.File(paths.import_shard(task, shard), "r") as f:
                for name in sorted(f):
                    h.update(name.encode() + f[name][...].tobytes())
            out[f"{task}/{shard}.h5"] = h.hexdigest()
            out[f"{task}/{shard}.json"] = hashlib.sha256(paths.import_sidecar(task, shard).read_bytes()).hexdigest()
    return out


def _rows(run: Path):
    paths = RunPaths(run)
    return [read_shard(paths.import_shard(t, k), expect_history=HISTORY)[0]
            for t in paths.import_tasks() for k in paths.import_complete_shards(t)]


def test_rows_are_encoded_as_self_play_encodes_them(tmp_path, pgn, games):
    p = _import(tmp_path / "run", [pgn])
    assert p.status == "done" and p.games == 30 and p.malformed == 1 and p.malformed_games == [31]
    assert "illegal" in p.malformed_errors[0] and p.rejected == {"variant": 1, "no result": 1}
    shards = _rows(tmp_path / "run")
    got = {k: np.concatenate([getattr(s.positions, k) for s in shards]) for k in ("bitboards", "repetitions", "turn", "castling", "halfmove")}
    policy = np.concatenate([s.policy_index for s in shards])
    value = np.concatenate([s.value_target for s in shards])
    assert all((s.policy_count == 1).all() and (s.policy_prob == 1).all() for s in shards)
    chains, moves, values = [], [], []
    for game in games:  # the reference: python-chess replaying the game, encoded as self-play encodes its positions
        result = {"1-0": 1, "0-1": -1, "1/2-1/2": 0}[game.headers["Result"]]
        board = game.board()
        for move in game.mainline_moves():
            chains.append(chain_for_board(board, HISTORY))
            moves.append(move_index(move, board.turn))
            values.append(result if board.turn else -result)
            board.push(move)
    want = batch_from_chains(chains, HISTORY)
    assert len(policy) == len(chains) > 1000
    for k in got:
        np.testing.assert_array_equal(got[k], np.asarray(getattr(want, k)).astype(got[k].dtype), err_msg=k)
    np.testing.assert_array_equal(policy, moves)
    np.testing.assert_array_equal(value, values)
    assert (np.concatenate([s.positions.repetitions for s in shards]) > 0).any()  # repetitions are really counted
    sidecars = [read_sidecar(x) for x in RunPaths(tmp_path / "run").import_sidecars()]
    assert sum(s.games for s in sidecars) == 30 and sum(s.rows for s in sidecars) == len(chains)
    assert sidecars[-1].source["next_game"] == 33 and sidecars[-1].source["malformed_games"] == [31]
    with h5py.File(RunPaths(tmp_path / "run").import_shard(0, 0), "r") as f:
        assert f.attrs["source"] == "pgn" and f.attrs["policy_target"] == "played_move"


def test_compressed_inputs_import_the_same_shards(tmp_path, pgn):
    import zstandard

    data = pgn.read_bytes()
    (tmp_path / "g.pgn.gz").write_bytes(gzip.compress(data))
    (tmp_path / "g.pgn.bz2").write_bytes(bz2.compress(data))
    (tmp_path / "g.pgn.zst").write_bytes(zstandard.ZstdCompressor().compress(data))
    cut = data.index(b"[Event", len(data) // 2)  # several frames, as pzstd and zstd -T write them
    (tmp_path / "frames.pgn.zst").write_bytes(b"".join(zstandard.ZstdCompressor().compress(part)
                                                       for part in (data[:1000], data[1000:cut], data[cut:])))
    (tmp_path / "misnamed.pgn").write_bytes(gzip.compress(data))  # told apart by its bytes, not its name
    digests = []
    for name in ("games.pgn", "g.pgn.gz", "g.pgn.bz2", "g.pgn.zst", "frames.pgn.zst", "misnamed.pgn"):
        run = tmp_path / f"run-{name}"
        _import(run, [tmp_path / name])
        digests.append({k: v for k, v in _digest(run).items() if k.endswith(".h5")})
    assert len(digests[0]) == 8 and all(d == digests[0] for d in digests)


def test_filters_by_rating_speed_and_ending(tmp_path, pgn, games):
    by_rating = _import(tmp_path / "a", [pgn], flt=GameFilter(min_elo=1900))
    keep = [g for g in games if min(int(g.headers["WhiteElo"]), int(g.headers["BlackElo"])) >= 1900]
    assert 0 < by_rating.games == len(keep) < 30 and by_rating.rejected["rating"] == 30 - len(keep) + 1  # + the broken game: unrated
    by_speed = _import(tmp_path / "b", [pgn], flt=GameFilter(speeds=("blitz",)))
    assert by_speed.games == sum(speed_of(g.headers["TimeControl"]) == "blitz" for g in games) == 12
    by_rules = _import(tmp_path / "c", [pgn], flt=GameFilter(ending="rules"))
    ends = [g.end().board() for g in games]  # over by the rules, or a draw a player may claim on the board as it is
    ended = sum(b.outcome() is not None or b.is_repetition(3) or b.halfmove_clock >= 100 for b in ends)
    assert 0 < by_rules.games == ended < 30 and by_rules.rejected.get("not ended by the rules", 0) == 30 - ended
    assert [speed_of(t) for t in ("15+0", "60+0", "180+0", "300+3", "600+5", "1800+20", "-", "?")] == \
        ["ultrabullet", "bullet", "blitz", "blitz", "rapid", "classical", "correspondence", ""]


def test_tasks_split_the_games_and_max_games_is_shared(tmp_path, pgn):
    whole = _rows_by_game(_import_all(tmp_path / "one", pgn, 1))
    split = _rows_by_game(_import_all(tmp_path / "three", pgn, 3))
    assert sorted(whole) == sorted(split) and len(whole) == 30
    capped = [_import(tmp_path / "cap", [pgn], 3, t, max_games=10) for t in range(3)]
    assert [p.games for p in capped] == [4, 3, 3]


def _import_all(run: Path, pgn: Path, tasks: int) -> Path:
    for t in range(tasks):
        assert _import(run, [pgn], tasks, t).status == "done"
    return run


def _rows_by_game(run: Path) -> list[bytes]:
    """Each game's rows (positions and moves) as bytes, whatever task or shard holds it."""
    out = []
    for s in _rows(run):
        for gid in np.unique(s.game_id):
            rows = s.game_id == gid
            out.append(s.positions.bitboards[rows].tobytes() + s.policy_index[rows].tobytes())
    return out


def test_killed_import_continues_and_writes_what_an_uninterrupted_one_writes(tmp_path, games):
    big = write_pgn(tmp_path / "big.pgn", games * 12)  # 360 games, one per shard: a few seconds of import
    args = ["import-pgn", str(tmp_path / "killed"), str(big), "--config", str(TINY), "--games-per-shard", "1"]
    proc = subprocess.Popen([str(Path(sys.executable).parent / "azhpc"), *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    folder = tmp_path / "killed" / "import" / "task-0000"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(folder.glob("*.json"))) < 20:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    written = len(list(folder.glob("*.json")))
    assert 20 <= written < 360, "the kill came too late to test anything"
    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    whole = run_cli("import-pgn", str(tmp_path / "whole"), str(big), "--config", str(TINY), "--games-per-shard", "1")
    assert whole.returncode == 0, whole.stderr
    assert _digest(tmp_path / "killed") == _digest(tmp_path / "whole") and len(_digest(tmp_path / "whole")) == 2 * 360
    assert not list(folder.glob(".*tmp*")) and not list(folder.glob("*.tmp"))
    # a further run reads nothing again and changes nothing
    before = _digest(tmp_path / "killed")
    assert run_cli(*args).returncode == 0 and _digest(tmp_path / "killed") == before


def test_bad_input_is_one_line_and_keeps_only_complete_shards(tmp_path, pgn):
    (tmp_path / "binary.pgn").write_bytes(bytes(range(256)) * 64)
    (tmp_path / "notes.txt").write_text("Dear diary,\nno chess today.\n")
    (tmp_path / "head.pgn.gz").write_bytes(gzip.compress(pgn.read_bytes())[:3000])  # cut within the first games
    (tmp_path / "stub.pgn.gz").write_bytes(gzip.compress(pgn.read_bytes())[:12])  # not one byte of PGN survives
    whole = gzip.compress(pgn.read_bytes() * 40)
    (tmp_path / "cut.pgn.gz").write_bytes(whole[: len(whole) // 2])  # cut after hundreds of games
    import zstandard

    small_window = zstandard.ZstdCompressionParameters.from_level(3, window_log=10)  # no match across the copies
    whole = zstandard.ZstdCompressor(compression_params=small_window).compress(pgn.read_bytes() * 40)
    (tmp_path / "cut.pgn.zst").write_bytes(whole[: len(whole) // 2])  # zstandard's own reader ends it quietly
    (tmp_path / "bad.pgn.zst").write_bytes(whole[:4] + bytes(range(256)) * 8)  # its magic, then garbage
    for name, words in (("binary.pgn", "not a PGN file"), ("notes.txt", "not a PGN file"), ("missing.pgn", "no such file"),
                        ("head.pgn.gz", "damaged after game"), ("stub.pgn.gz", "not a readable gzip file"),
                        ("cut.pgn.gz", "damaged after game"),
                        ("cut.pgn.zst", "damaged after game"), ("bad.pgn.zst", "not a readable zstandard file")):
        run = tmp_path / f"run-{name}"
        r = run_cli("import-pgn", str(run), str(tmp_path / name), "--config", str(TINY))
        assert r.returncode == 1 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "Traceback" not in r.stderr
        shards = list((run / "import").rglob("*.h5")) if run.exists() else []
        assert all(read_sidecar(s.with_suffix(".json")) for s in shards)  # only complete shards, if any
    with pytest.raises(PgnFileError, match="not a PGN file"):
        open_pgn(tmp_path / "notes.txt")
    (tmp_path / "table.csv").write_text("2024,1,3\n2025,4,5\n")  # digits first, but no move number
    with pytest.raises(PgnFileError, match="not a PGN file"):
        open_pgn(tmp_path / "table.csv")
    # a bad second file is refused before any game of the first is imported
    r = run_cli("import-pgn", str(tmp_path / "two"), str(pgn), str(tmp_path / "notes.txt"), "--config", str(TINY))
    assert r.returncode == 1 and "notes.txt: not a PGN file" in r.stderr, r.stderr
    assert not list((tmp_path / "two").rglob("*.h5")) and not (tmp_path / "two" / "import" / "import.json").exists()
    # the same run with other options would import other games: refused
    _import(tmp_path / "fixed", [pgn])
    r = run_cli("import-pgn", str(tmp_path / "fixed"), str(pgn), "--min-elo", "2000")
    assert r.returncode == 1 and "already imports other games" in r.stderr


def _visit(text: str, flt: GameFilter = GameFilter()):
    from alphazero_hpc.pgn.rows import RowVisitor

    return chess.pgn.read_game(io.StringIO(text), Visitor=lambda: RowVisitor(flt, HISTORY))


def test_null_moves_and_claimable_draws_in_a_decisive_game():
    # a null move ('--', 'Z0': analysis notation) makes the game malformed, counted, not a failed task
    for null in ("--", "Z0"):
        g = _visit(f'[Result "1-0"]\n\n1. e4 {null} 2. d4 e5 1-0\n')
        assert g.malformed == "null move at ply 2" and not g.accepted
    # threefold repetition on the board, not claimed: the game went on to a resignation or a flag
    shuffle = "1. Nf3 Nf6 2. Ng1 Ng8 3. Nf3 Nf6 4. Ng1 Ng8"
    won = _visit(f'[Result "0-1"]\n\n{shuffle} 0-1\n')
    assert won.accepted and won.termination == "result tag" and won.result == -1
    assert _visit(f'[Result "0-1"]\n\n{shuffle} 0-1\n', GameFilter(ending="rules")).rejected == "not ended by the rules"
    drawn = _visit(f'[Result "1/2-1/2"]\n\n{shuffle} 1/2-1/2\n', GameFilter(ending="rules"))
    assert drawn.accepted and drawn.termination == "threefold repetition" and drawn.result == 0
    # a position the rules end by themselves still must agree with the tag
    # names of standard chess python-chess does not know are standard chess; other variants are left out
    for name, rejected in (("", ""), ("Normal", ""), ("Standard", ""), ("Crazyhouse", "variant"), ("Chess960", "variant")):
        g = _visit(f'[Variant "{name}"]\n[Result "1-0"]\n\n1. e4 e5 1-0\n')
        assert (g.rejected, g.malformed, len(g.chains)) == (rejected, "", 0 if rejected else 2), name
    mate = _visit('[Result "1-0"]\n\n1. f3 e5 2. g4 Qh4# 1-0\n')
    assert mate.malformed == "result tag 1-0 but the game ends by checkmate"


# A UCI engine that plays the first legal move until the game has 8 plies, then answers "bestmove (none)"
RESIGNER = """
import sys
import chess
board = chess.Board()
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "uci":
        print("id name resigner\\nuciok", flush=True)
    elif words[0] == "isready":
        print("readyok", flush=True)
    elif words[0] == "position":
        board = chess.Board()
        for uci in words[words.index("moves") + 1:] if "moves" in words else []:
            board.push_uci(uci)
    elif words[0] == "go":
        move = next(iter(board.legal_moves)).uci() if board.ply() < 8 else "(none)"
        print(f"bestmove {move}", flush=True)
    elif words[0] == "quit":
        break
"""


def test_a_stockfish_game_ends_where_the_engine_gives_no_move(tmp_path):
    """The Stockfish games of ``azhpc bench pretrain`` (tools/sfgames): an engine's "bestmove (none)" ends the game
    unfinished, a draw in the tags, instead of pushing a None move. Real Stockfish says it only where no move is
    legal, which the loop stops at first; this stand-in says it in the middle of a game."""
    from alphazero_hpc.tools.sfgames import stockfish_game

    script = tmp_path / "resigner.py"
    script.write_text(RESIGNER)
    with chess.engine.SimpleEngine.popen_uci([sys.executable, str(script)]) as engine:
        game = stockfish_game(engine, number=3, seed=0, depth=1, max_plies=300)
    board = game.end().board()
    assert board.ply() == 8 and not board.is_game_over(claim_draw=True)
    assert game.headers["Result"] == "1/2-1/2"
    # and its PGN reads back as the same 8 plies
    again = chess.pgn.read_game(io.StringIO(str(game)))
    assert again is not None and len(list(again.mainline_moves())) == 8


def test_an_import_that_kept_no_games_is_refused_by_launch_pretrain(tmp_path, pgn):
    run = tmp_path / "run"
    r = run_cli("import-pgn", str(run), str(pgn), "--config", str(TINY), "--min-elo", "4000")
    assert r.returncode == 0, r.stderr
    r = run_cli("launch", "--run-dir", str(run), "--cluster", "local", "--pretrain", "--config", str(TINY))
    assert r.returncode == 1 and "no games kept" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (run / "launch.json").exists()


def test_cli_reports_malformed_games_and_pretrains_generation_zero(tmp_path, pgn):
    run = tmp_path / "run"
    r = run_cli("import-pgn", str(run), str(pgn), "--config", str(TINY), "--set", "pretrain.epochs=2")
    assert r.returncode == 0, r.stderr
    assert "30 games" in r.stdout and "1 malformed game(s) skipped (game 31: illegal" in r.stdout
    env = {"OMP_NUM_THREADS": "1"}
    t = subprocess.run([sys.executable, "-m", "alphazero_hpc.train", "--run-dir", str(run), "--generation", "-1",
                        "--workers", "0"], capture_output=True, text=True, env={**os.environ, **env}, cwd=ROOT, timeout=300)
    assert t.returncode == 0, t.stderr
    import torch

    ckpt = torch.load(run / "models" / "gen-0000.pt", weights_only=False)
    positions = sum(read_sidecar(x).rows for x in RunPaths(run).import_sidecars())
    assert ckpt["trained_from"] == -1 and ckpt["steps"] == -(-2 * positions // 64)
    m = ckpt["metrics"]
    assert m["policy_loss"] < m["first_policy_loss"] - 1.0  # it learned the played moves
    st = json.loads(run_cli("status", str(run), "--json").stdout)
    assert st["import"]["games"] == 30 and st["import"]["malformed_games"] == [31]


@pytest.mark.slow
def test_slurm_import_array_then_pretraining_before_the_first_self_play(slurm_cluster, slurm_tmp, pgn):
    """import-pgn --tasks 2 is a SLURM array; launch --pretrain queues the pretraining job after it (afterok) and
    generation 0's self-play after the pretraining job, which writes models/gen-0000.pt from the imported games.
    A cancelled pretraining job is resubmitted by azhpc resume."""
    pgn = shutil.copy(pgn, slurm_tmp)  # readable by the user who submits
    run = slurm_tmp / "slp"
    settings = ["--config", str(TINY), "--set", "selfplay.max_plies=40", "--set", "train.loader_workers=0",
                "--set", "slurm.gpus_per_node=2", "--set", "slurm.cpus_per_task=1", "--set", "run.generations=1"]
    # The default partition is DOWN while the import is submitted twice, so the array stays queued (scontrol hold after
    # the submission raced with the array, which on a quiet testbed could start and finish before the hold; the
    # testbed's nodes are shared, OverSubscribe=FORCE, so a job cannot hold them either)
    partition = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, check=True).stdout.split()
    default = next(p.rstrip("*") for p in partition if p.endswith("*"))
    subprocess.run(["scontrol", "update", f"PartitionName={default}", "State=DOWN"], check=True)
    try:
        r = slurm_cli("import-pgn", str(run), str(pgn), "--tasks", "2", "--cluster", "slurm", *settings)
        assert r.returncode == 0 and "SLURM array" in r.stdout, r.stderr
        imports = json.loads((run / "import" / "jobs.json").read_text())["jobs"]
        assert len(imports) == 1
        again = slurm_cli("import-pgn", str(run), str(pgn), "--tasks", "2", "--cluster", "slurm", *settings)
        assert again.returncode == 1 and f"still queued or running (SLURM job(s) {imports[0]})" in again.stderr, again.stderr
        assert json.loads((run / "import" / "jobs.json").read_text())["jobs"] == imports  # nothing submitted twice
        r = slurm_cli("launch", "--cluster", "slurm", "--run-dir", str(run), "--pretrain")
        assert r.returncode == 0, r.stderr
    finally:
        subprocess.run(["scontrol", "update", f"PartitionName={default}", "State=UP"], check=True)
    record = json.loads((run / "launch.json").read_text())
    pre = [j for j in record["jobs"] if j["generation"] == -1]
    sp0 = [j for j in record["jobs"] if j["generation"] == 0 and j["stage"] == "selfplay"]
    assert len(pre) == 1 and pre[0]["stage"] == "train"
    assert pre[0]["dependency"] in (f"afterok:{imports[0]}", "")  # "" when the import was over before the launch
    assert sp0[0]["dependency"] == f"afterok:{pre[0]['job_id']}"
    # scancel of the pretraining job: the chain after it can never run; azhpc resume queues pretraining again (after
    # the import array if that still runs) and the generation after it
    subprocess.run(["scancel", pre[0]["job_id"]], check=True)
    r = slurm_cli("resume", str(run))
    assert r.returncode == 0, r.stderr
    record = json.loads((run / "launch.json").read_text())
    pre = [j for j in record["jobs"] if j["generation"] == -1]
    assert [j["attempt"] for j in pre] == [1, 2], pre
    assert pre[1]["dependency"] in (f"afterok:{imports[0]}", "")
    sp0 = [j for j in record["jobs"] if j["generation"] == 0 and j["stage"] == "selfplay"]
    assert sp0[-1]["dependency"] == f"afterok:{pre[1]['job_id']}", sp0
    deadline = time.time() + 400
    while time.time() < deadline and not (run / "models" / "gen-0001.pt").exists():
        time.sleep(3)
    assert (run / "models" / "gen-0001.pt").exists(), run_cli("status", str(run)).stdout
    deadline = time.time() + 90
    while time.time() < deadline and user_jobs():  # the training job ends a little after its network is written
        time.sleep(1)
    assert not user_jobs(), user_jobs()
    st = json.loads(run_cli("status", str(run), "--json").stdout)
    import torch

    assert torch.load(run / "models" / "gen-0000.pt", weights_only=False)["trained_from"] == -1
    assert st["import"]["done"] == 2 and st["import"]["games"] == 30 and st["pretrain"]["state"] == "done"
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", imports[0], "-o", "JobID,State"], capture_output=True, text=True).stdout
    assert sorted(line.split("|")[1].split()[0] for line in out.splitlines() if line) == ["COMPLETED", "COMPLETED"], out


@pytest.mark.slow
def test_learning_check_a_network_trained_only_on_stockfish_games_beats_random(tmp_path, games):
    """azhpc bench pretrain, small: 200 Stockfish games -> import -> pretraining -> a match against random under the
    rules of chess, won by a margin outside the 95% interval, in the run's ledger. (Greedy: docs/pretraining.md.)"""
    from alphazero_hpc.evaluate.engines import find_stockfish
    from alphazero_hpc.tools.pgnbench import learning_check

    entries = learning_check(tmp_path, find_stockfish(), games=200, depth=2, config=ROOT / "configs" / "learn-2x32.yaml",
                             overrides=("pretrain.epochs=2",), eval_games=10, simulations=48, opponents=("random",),
                             workers=2, echo=lambda s: None)
    (entry,) = entries
    assert entry["opponent"] == "random" and entry["games"] == 10 and entry["adjudicate_material"] == 0
    assert entry["elo_low"] is not None, entry
    assert entry["elo_low"] > 0, entry  # the lower end of the 95% interval is above random
    ledger = [json.loads(x) for x in (tmp_path / "run" / "eval" / "ledger.jsonl").read_text().splitlines()]
    assert [(e["player"], e["opponent"]) for e in ledger] == [("gen:0", "random")]
    import torch

    assert torch.load(tmp_path / "run" / "models" / "gen-0000.pt", weights_only=False)["trained_from"] == -1


QUICK_RUN = ["--config", str(TINY), "--set", "selfplay.games_per_generation=4", "--set", "selfplay.games_per_shard=2",
             "--set", "selfplay.max_plies=24", "--set", "mcts.simulations=8", "--set", "mcts.fast_simulations=2",
             "--set", "run.generations=1", "--set", "train.loader_workers=0"]


@pytest.mark.slow
def test_local_launch_pretrains_generation_zero_before_its_self_play(tmp_path, pgn):
    from alphazero_hpc.net.checkpoint import file_digest

    run = tmp_path / "loc"
    no_import = run_cli("launch", "--run-dir", str(tmp_path / "empty"), "--cluster", "local", "--pretrain", *QUICK_RUN)
    assert no_import.returncode == 1 and "import-pgn" in no_import.stderr and len(no_import.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "empty").exists()  # the failed launch made the folder and removes it
    assert run_cli("import-pgn", str(run), str(pgn), *QUICK_RUN).returncode == 0
    r = run_cli("launch", "--run-dir", str(run), "--cluster", "local", "--pretrain", "--wait", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    record = json.loads((run / "launch.json").read_text())
    stages = [(j["generation"], j["stage"]) for j in record["jobs"]]
    assert stages[0] == (-1, "train") and stages[1:] == [(0, "selfplay")] * (len(stages) - 2) + [(0, "train")]
    assert json.loads(run_cli("status", str(run), "--json").stdout)["pretrain"]["state"] == "done"
    with h5py.File(run / "selfplay" / "gen-0000" / "task-0000" / "shard-00000.h5", "r") as f:
        assert f.attrs["model_sha256"] == file_digest(run / "models" / "gen-0000.pt")  # self-play played the pretrained net
    import torch

    assert torch.load(run / "models" / "gen-0000.pt", weights_only=False)["trained_from"] == -1
    assert (run / "models" / "gen-0001.pt").exists()



def test_slurm_pretraining_with_more_ranks_than_imported_shards_is_refused_at_launch(slurm_cluster, slurm_tmp, pgn):
    """Each training rank reads whole shards: an import of one shard for a job of two ranks is one line at launch,
    with the fix, before anything is queued; the imported games stay."""
    pgn = shutil.copy(pgn, slurm_tmp)  # readable by the user who submits
    run = slurm_tmp / "few"
    settings = ["--config", str(TINY), "--set", "slurm.gpus_per_node=2", "--set", "run.generations=1"]
    assert slurm_cli("import-pgn", str(run), str(pgn), *settings).returncode == 0
    shards = sorted((run / "import").rglob("*.h5"))
    assert len(shards) == 1
    r = slurm_cli("launch", "--cluster", "slurm", "--run-dir", str(run), "--pretrain")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "1 shard(s) for a pretraining job of 2 ranks" in r.stderr and "--games-per-shard" in r.stderr, r.stderr
    assert not (run / "launch.json").exists() and sorted((run / "import").rglob("*.h5")) == shards
