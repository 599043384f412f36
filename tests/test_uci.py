"""azhpc uci driven by python-chess's UCI client: handshake, positions, limits, stop, and a full game."""

import shutil
import sys
import time
from pathlib import Path

import chess
import chess.engine
import numpy as np
import pytest

from alphazero_hpc.net.checkpoint import save_checkpoint
from alphazero_hpc.config import ModelConfig
from alphazero_hpc.net.model import build_model


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("uci") / "gen-0003.pt"
    save_checkpoint(ckpt, build_model(ModelConfig(blocks=1, filters=16, history=2), seed=3), generation=3)
    azhpc = shutil.which("azhpc", path=str(Path(sys.executable).parent))
    assert azhpc is not None, "the azhpc console script is not installed next to this python"
    eng = chess.engine.SimpleEngine.popen_uci([azhpc, "uci", "--checkpoint", str(ckpt), "--simulations", "8",
                                               "--device", "cpu"], timeout=60)
    yield eng
    eng.quit()


def test_handshake_and_options(engine):
    assert engine.id["name"].startswith("azhpc gen 3")
    assert "Simulations" in engine.options
    engine.ping()  # isready -> readyok


def test_nodes_limit_and_info(engine):
    board = chess.Board()
    board.push_san("e4")
    info = engine.analyse(board, chess.engine.Limit(nodes=20))
    assert info["nodes"] == 21  # 20 simulations plus the root's expansion
    assert info["pv"][0] in board.legal_moves and "score" in info


def test_fen_with_moves_and_movetime(engine):
    board = chess.Board("6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1")
    board.push_san("Kf1")
    board.push_san("Kf8")
    t0 = time.monotonic()
    result = engine.play(board, chess.engine.Limit(time=0.3))
    assert result.move in board.legal_moves
    assert time.monotonic() - t0 < 5


def test_infinite_search_stops_on_request(engine):
    with engine.analysis(chess.Board()) as analysis:
        time.sleep(0.5)
        analysis.stop()
        best = analysis.wait()
    assert best.move in chess.Board().legal_moves


def test_clock_limits(engine):
    """The fixture's --simulations 8 caps a move on a clock too (the clock's share would buy far more here)."""
    result = engine.play(chess.Board(), chess.engine.Limit(white_clock=20.0, black_clock=20.0, white_inc=0.1),
                         info=chess.engine.INFO_ALL)
    assert result.move in chess.Board().legal_moves and result.info.get("nodes") == 9


def test_full_game_against_a_random_mover(engine):
    rng = np.random.default_rng(0)
    board = chess.Board()
    engine.configure({"Simulations": 4})
    while not board.is_game_over(claim_draw=True) and board.ply() < 400:
        if board.turn == chess.WHITE:
            move = engine.play(board, chess.engine.Limit(nodes=4)).move
            assert move in board.legal_moves, (board.fen(), move)
        else:
            legal = list(board.legal_moves)
            move = legal[int(rng.integers(len(legal)))]
        board.push(move)
    assert board.ply() >= 10
    # the game was played through: the engine never failed to answer; ending reached or the 400-ply cap
    assert board.is_game_over(claim_draw=True) or board.ply() == 400


# -- faults: the engine always answers bestmove and bounds its memory ----------------------------------
class NaNEvaluator:
    history = 2

    def evaluate(self, planes):
        return np.full((len(planes), 4672), np.nan, np.float32), np.full(len(planes), np.nan, np.float32)


def nodes(out) -> int:
    """The nodes of the engine's last info line."""
    return int(out.getvalue().split(" nodes ")[-1].split()[0])


def _engine(evaluator, **kw):
    import io

    from alphazero_hpc.config import MCTSConfig
    from alphazero_hpc.evaluate.uci import UciEngine
    from alphazero_hpc.game.rules import search_rules

    out = io.StringIO()
    return UciEngine(evaluator, MCTSConfig(), search_rules(10**6), 8, None, out, "test", **kw), out


def test_nan_network_still_answers_bestmove():
    eng, out = _engine(NaNEvaluator())
    eng.handle("position startpos moves e2e4")
    eng.handle("go nodes 16")
    eng._finish_search()
    lines = out.getvalue().splitlines()
    assert any(line.startswith("info string error") and "not finite" in line for line in lines), lines
    move = chess.Move.from_uci(lines[-1].split()[1])
    board = chess.Board()
    board.push_san("e4")
    assert lines[-1].startswith("bestmove") and move in board.legal_moves


def test_infinite_search_stops_growing_at_max_nodes_and_waits_for_stop():
    from alphazero_hpc.search.fakes import UniformEvaluator

    eng, out = _engine(UniformEvaluator(2))
    eng.handle("setoption name MaxNodes value 1000")
    eng.handle("position startpos")
    eng.handle("go infinite")
    time.sleep(5.0)  # the uniform evaluator fills 1,000 nodes in well under a second
    assert eng._thread.is_alive() and "bestmove" not in out.getvalue()  # infinite: bestmove only after stop
    eng.handle("stop")
    last = out.getvalue().splitlines()[-1]
    nodes = int(out.getvalue().split(" nodes ")[1].split()[0])
    assert last.startswith("bestmove") and 900 <= nodes <= 1001  # stopped by MaxNodes, not by the stop


def test_a_training_state_is_not_taken_for_a_network(tmp_path):
    import io

    import torch

    from alphazero_hpc.errors import CheckpointError
    from alphazero_hpc.net.checkpoint import load_model

    state = tmp_path / "state.pt"
    buffer = io.BytesIO()
    torch.save({"schema": 1, "state_dict": build_model(ModelConfig(blocks=1, filters=16)).state_dict(), "step": 3}, buffer)
    state.write_bytes(buffer.getvalue())
    with pytest.raises(CheckpointError, match="training state, not a network"):
        load_model(state)


def test_gumbel_search_answers_nodes_and_movetime():
    import dataclasses
    import io

    from alphazero_hpc.config import MCTSConfig
    from alphazero_hpc.evaluate.uci import UciEngine
    from alphazero_hpc.game.rules import search_rules
    from alphazero_hpc.search.fakes import MaterialEvaluator

    out = io.StringIO()
    eng = UciEngine(MaterialEvaluator(2), dataclasses.replace(MCTSConfig(), algorithm="gumbel", gumbel_considered=64),
                    search_rules(10**6), 16, None, out, "gumbel")
    eng.handle("position fen 4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1")  # the rook takes the hanging queen
    eng.handle("go nodes 64")
    eng._finish_search()
    eng.handle("go movetime 300")
    eng._finish_search()
    answers = [line for line in out.getvalue().splitlines() if line.startswith("bestmove")]
    assert answers == ["bestmove d2d5", "bestmove d2d5"]


@pytest.mark.parametrize("configured, flag, expected", [("same", None, "puct"), ("same", "gumbel", "gumbel"),
                                                        ("gumbel", None, "gumbel"), ("gumbel", "same", "puct")])
def test_uci_plays_with_the_runs_eval_algorithm_unless_search_says_otherwise(tmp_path, monkeypatch, configured, flag,
                                                                          expected):
    """A network of a run folder plays UCI with its run's eval.algorithm (here over mcts.algorithm puct); --search
    overrides it, and --search same is mcts.algorithm, as in azhpc evaluate."""
    import io

    from alphazero_hpc.evaluate import uci
    from alphazero_hpc.store.paths import RunPaths
    from alphazero_hpc.store.runconfig import resolve_run_config

    from .conftest import TINY

    paths = RunPaths(tmp_path / "run")
    cfg = resolve_run_config(paths, TINY, [f"eval.algorithm={configured}"])
    assert cfg.mcts.algorithm == "puct"
    save_checkpoint(paths.model(1), build_model(cfg.model, seed=1), generation=1)
    seen = []

    class Recorder:
        def __init__(self, evaluator, mcts, *args, **kw):
            seen.append(mcts.algorithm)

        def run(self, stdin):
            pass

    monkeypatch.setattr(uci, "UciEngine", Recorder)
    uci.run_uci(paths.model(1), 8, None, "cpu", io.StringIO("quit\n"), io.StringIO(), search=flag)
    assert seen == [expected]


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_tree_reuse_searches_on_from_the_visits_the_last_search_left(algorithm):
    """With TreeReuse the position after the engine's move and a reply starts from the visits that reply's subtree
    had; without it, from none. A position that does not follow the last one starts afresh."""
    import dataclasses
    import io

    from alphazero_hpc.config import MCTSConfig
    from alphazero_hpc.evaluate.uci import UciEngine
    from alphazero_hpc.game.rules import search_rules
    from alphazero_hpc.search.fakes import MaterialEvaluator

    for reuse in (True, False):
        out = io.StringIO()
        eng = UciEngine(MaterialEvaluator(2), dataclasses.replace(MCTSConfig(), algorithm=algorithm), search_rules(10**6),
                        8, None, out, "reuse", tree_reuse=reuse)
        eng.handle("position startpos")
        eng.handle("go nodes 400")
        eng._finish_search()
        pv = out.getvalue().split(" pv ")[-1].split()
        eng.handle(f"position startpos moves {pv[0]} {pv[1]}")  # the reply the search expected: it has visits
        eng.handle("go nodes 50")
        eng._finish_search()
        assert (nodes(out) > 51) == reuse, out.getvalue()
        eng.handle("position startpos moves e2e4 e7e5 g1f3")  # not after the last position: a new tree
        eng.handle("go nodes 50")
        eng._finish_search()
        assert nodes(out) == 51
    eng.handle("setoption name TreeReuse value true")
    assert eng.tree_reuse


def test_tree_reuse_keeps_max_nodes_for_the_kept_tree_not_the_dead_one():
    """MaxNodes bounds the forest: with TreeReuse the nodes the last search left outside the kept subtree go before
    the next search, which gets its simulations up to the bound instead of stopping at once."""
    from alphazero_hpc.search.fakes import UniformEvaluator

    eng, out = _engine(UniformEvaluator(2), tree_reuse=True)
    eng.handle("setoption name MaxNodes value 1000")
    eng.handle("position startpos")
    eng.handle("go nodes 5000")
    eng._finish_search()
    first = int(out.getvalue().split(" nodes ")[-1].split()[0])
    pv = out.getvalue().split(" pv ")[-1].split()
    eng.handle(f"position startpos moves {pv[0]} {pv[1]}")
    eng.handle("go nodes 5000")
    eng._finish_search()
    second = int(out.getvalue().split(" nodes ")[-1].split()[0])
    assert 900 <= first <= 1001 and second >= 500, out.getvalue()  # (a stuck search: the kept visits + 1)


@pytest.mark.parametrize("configured, flag, expected", [(False, None, False), (True, None, True), (False, True, True),
                                                        (True, False, False)])
def test_uci_keeps_trees_as_the_run_says_unless_the_flag_says_otherwise(tmp_path, monkeypatch, configured, flag,
                                                                        expected):
    """azhpc uci reuses trees where the run's eval.tree_reuse says so; --tree-reuse/--no-tree-reuse overrides it."""
    import io

    from alphazero_hpc.evaluate import uci
    from alphazero_hpc.store.paths import RunPaths
    from alphazero_hpc.store.runconfig import resolve_run_config

    from .conftest import TINY

    paths = RunPaths(tmp_path / "run")
    cfg = resolve_run_config(paths, TINY, [f"eval.tree_reuse={str(configured).lower()}"])
    assert cfg.eval.tree_reuse == configured
    save_checkpoint(paths.model(1), build_model(cfg.model, seed=1), generation=1)
    seen = []

    class Recorder:
        def __init__(self, *args, **kw):
            seen.append(args[-1])

        def run(self, stdin):
            pass

    monkeypatch.setattr(uci, "UciEngine", Recorder)
    uci.run_uci(paths.model(1), 8, None, "cpu", io.StringIO("quit\n"), io.StringIO(), tree_reuse=flag)
    assert seen == [expected]


def test_simulations_set_on_purpose_cap_a_clocked_search_and_the_clock_can_still_end_it_sooner():
    """`azhpc uci --simulations 800` (or setoption Simulations) is how the network was rated: a match runner's clock
    or movetime must not turn it into a search of whatever the clock allows, which depends on the machine. Left at
    its default, a clock alone decides; and a clock shorter than the simulations still ends the search in time."""
    from alphazero_hpc.search.fakes import MaterialEvaluator

    clocks = ("go wtime 60000 btime 60000 winc 600 binc 600", "go movetime 400")
    for fixed in (True, False):
        eng, out = _engine(MaterialEvaluator(2), fixed_simulations=fixed)
        for go in clocks:
            eng.handle("position startpos moves e2e4")
            eng.handle(go)
            eng._finish_search()
            assert (nodes(out) == 9) == fixed, (go, out.getvalue())  # 8 simulations and the root's expansion
    eng, out = _engine(MaterialEvaluator(2))
    eng.handle("setoption name Simulations value 12")  # a GUI's setting is on purpose too
    eng.handle(clocks[0])
    eng._finish_search()
    assert nodes(out) == 13
    eng.handle("setoption name Simulations value 1000000")  # more than 100 ms of clock buys: the clock ends it
    eng.handle("go wtime 3000 btime 3000")
    t0 = time.monotonic()
    eng._finish_search()
    assert time.monotonic() - t0 < 5 and nodes(out) < 1_000_001 and out.getvalue().splitlines()[-1].startswith("bestmove")


def test_uci_help_names_the_search_a_go_without_limit_gets():
    """``azhpc uci --help`` states what a ``go`` with no limit searches; the CLI does not import the engine (torch) to
    say it, so the figure is written there by hand and must follow ``uci.DEFAULT_SIMULATIONS``."""
    from click.testing import CliRunner

    from alphazero_hpc.cli import main
    from alphazero_hpc.evaluate.uci import DEFAULT_SIMULATIONS

    res = CliRunner().invoke(main, ["uci", "--help"])
    assert res.exit_code == 0, res.output
    assert f"a go with no limit searches {DEFAULT_SIMULATIONS}." in " ".join(res.output.split()), res.output


def test_uci_measures_its_cpu_thread_count_on_its_own_batches(tmp_path):
    """On a CPU the engine times one thread against torch's count on its own batches and keeps the faster (one line
    on stderr, stdout left to the protocol): at one game's batches two threads made an 800-simulation move 2.3-2.6x
    slower on a 2-core machine (docs/evaluation.md, "UCI"). AZHPC_TORCH_THREADS fixes the count, and then nothing is measured."""
    import os
    import subprocess

    ckpt = tmp_path / "gen-0001.pt"
    save_checkpoint(ckpt, build_model(ModelConfig(blocks=1, filters=16, history=2), seed=1), generation=1)
    azhpc = shutil.which("azhpc", path=str(Path(sys.executable).parent))
    assert azhpc is not None
    commands = "uci\nisready\nposition startpos\ngo nodes 200\n"
    for fixed in (None, "1"):
        env = {k: v for k, v in os.environ.items() if k != "AZHPC_TORCH_THREADS"}
        env["OMP_NUM_THREADS"] = "2"  # torch's count as on a 2-core machine, whatever this one has
        if fixed:
            env["AZHPC_TORCH_THREADS"] = fixed
        proc = subprocess.Popen([azhpc, "uci", "--checkpoint", str(ckpt), "--simulations", "8", "--device", "cpu"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(commands)
        proc.stdin.flush()
        lines = []
        for line in proc.stdout:  # wait for the search's answer before quitting
            lines.append(line)
            if line.startswith("bestmove"):
                break
        out, err = proc.communicate("quit\n", timeout=60)
        assert any(line.startswith("bestmove") for line in lines), lines + [out, err]
        assert not any("thread" in line for line in lines + out.splitlines()), lines  # stdout is the protocol's
        measured = "the network on the CPU:" in err and "1 thread" in err and "2 threads" in err
        assert measured == (fixed is None), (fixed, err)
