"""The self-play task (selfplay/task.py, azhpc selfplay): killed at any moment and rerun it writes exactly the
shards of an uninterrupted run; progress after every game; a crash recorded; shard attributes and sidecars."""

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from alphazero_hpc.search.fakes import UniformEvaluator
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.shards import read_shard
from alphazero_hpc.selfplay.task import run_selfplay_task

from .conftest import run_cli

FAST = ["selfplay.games_per_generation=12", "selfplay.games_per_shard=2", "selfplay.games_in_flight=3",
        "selfplay.max_plies=30", "mcts.simulations=8", "mcts.fast_simulations=2", "model.history=2"]

SCRIPT = textwrap.dedent("""
    import sys
    from alphazero_hpc.search.fakes import UniformEvaluator
    from alphazero_hpc.selfplay.task import run_selfplay_task
    run_selfplay_task(sys.argv[1], 0, 1, 2, None, sys.argv[2:], evaluator=UniformEvaluator(2))
""")


def shard_contents(run: Path, task: int = 1) -> dict[int, dict[str, np.ndarray]]:
    paths = RunPaths(run)
    out = {}
    for k in paths.complete_shards(0, task):
        data, _ = read_shard(paths.shard(0, task, k))
        out[k] = {"bitboards": data.positions.bitboards, "policy_index": data.policy_index,
                  "policy_prob": data.policy_prob, "value_target": data.value_target, "game_id": data.game_id}
    return out


def test_sigkill_at_any_moment_then_rerun_gives_exactly_the_uninterrupted_shards(tmp_path):
    clean = tmp_path / "clean"
    subprocess.run([sys.executable, "-c", SCRIPT, str(clean), *FAST], check=True, timeout=300)
    expected = shard_contents(clean)
    assert len(expected) == 3  # 12 games over 2 tasks, 2 games per shard

    run = tmp_path / "killed"
    paths = RunPaths(run)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(run), *FAST])
    deadline = time.time() + 240
    while not paths.complete_shards(0, 1) and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = paths.complete_shards(0, 1)
    assert 1 <= len(done_before) < 3, "the kill must land mid-run"
    # Every visible shard is complete and valid; no temporary is mistaken for a shard.
    for h5 in paths.task_dir(0, 1).glob("shard-*.h5"):
        read_shard(h5)
    progress = json.loads(paths.progress(0, 1).read_text())
    assert progress["status"] == "running" and progress["games_done"] >= 1  # may lag the last shard by a game

    subprocess.run([sys.executable, "-c", SCRIPT, str(run), *FAST], check=True, timeout=300)
    assert not list(paths.task_dir(0, 1).glob(".*.tmp"))
    got = shard_contents(run)
    assert got.keys() == expected.keys()
    for k in expected:
        for name in expected[k]:
            assert np.array_equal(got[k][name], expected[k][name]), (k, name)
    progress = json.loads(paths.progress(0, 1).read_text())
    assert progress["status"] == "done" and progress["attempt"] == 2
    assert progress["games_in_shards"] == 6
    assert progress["positions"] == sum(len(v["value_target"]) for v in expected.values())
    # the attempt's start-up, from its process's start: to a ready search, then to its first game
    assert 0 < progress["process_started"] <= progress["started"]
    assert 0 < progress["ready_s"] <= progress["first_game_s"] < 300 and 0 < progress["ready_cpu_s"] < 300


def test_progress_is_written_after_every_game_and_a_crash_is_recorded(tmp_path):
    progress_file = RunPaths(tmp_path).progress(0, 0)

    class Exploding(UniformEvaluator):
        def evaluate(self, planes):
            # Crash once a watcher could already have seen a game finish.
            if progress_file.exists() and json.loads(progress_file.read_text())["games_done"] >= 1:
                raise RuntimeError("CUDA error: device-side assert (simulated)")
            return super().evaluate(planes)

    with pytest.raises(RuntimeError):
        run_selfplay_task(tmp_path, 0, 0, 1, None, FAST, evaluator=Exploding(2))
    p = json.loads(RunPaths(tmp_path).progress(0, 0).read_text())
    assert p["status"] == "failed"
    assert "device-side assert" in p["error"] and "Traceback" in p["traceback"]
    assert p["games_done"] >= 1  # progress moved before the crash


def test_rerun_of_a_finished_task_does_nothing(tmp_path):
    run_selfplay_task(tmp_path, 0, 0, 4, None, FAST, evaluator=UniformEvaluator(2))
    paths = RunPaths(tmp_path)
    stamps = {p: p.stat().st_mtime_ns for p in paths.task_dir(0, 0).iterdir()}
    p = run_selfplay_task(tmp_path, 0, 0, 4, None, (), evaluator=UniformEvaluator(2))
    assert p.status == "done" and p.games_in_shards == 3
    assert {p: p.stat().st_mtime_ns for p in paths.task_dir(0, 0).iterdir()} == stamps


def test_shard_attributes_and_sidecar(tmp_path):
    run_selfplay_task(tmp_path, 0, 0, 4, None, FAST, evaluator=UniformEvaluator(2))
    paths = RunPaths(tmp_path)
    with h5py.File(paths.shard(0, 0, 0)) as h5:
        attrs = dict(h5.attrs)
        assert h5["bitboards"].dtype == np.uint64 and h5["bitboards"].shape[1:] == (2, 8)
    for key in ("schema_version", "generation", "task", "attempt", "model_sha256", "config_sha256", "created"):
        assert key in attrs
    side = json.loads(paths.sidecar(0, 0, 0).read_text())
    assert side["rows"] == attrs["rows"] > 0 and side["games"] == 2
    assert "1-0" in paths.pgn(0, 0, 0).read_text() or "1/2-1/2" in paths.pgn(0, 0, 0).read_text() or "0-1" in paths.pgn(0, 0, 0).read_text()


def test_cli_selfplay_with_the_real_network(tmp_path, tiny_args):
    res = run_cli("selfplay", "--run-dir", str(tmp_path), "--num-tasks", "2", "--task", "0", *tiny_args)
    assert res.returncode == 0, res.stderr
    assert "2 games" in res.stdout
    paths = RunPaths(tmp_path)
    assert paths.model(0).exists() and len(paths.complete_shards(0, 0)) == 1


def test_pipeline_with_the_network_on_the_cpu_in_one_process_is_called_out(tmp_path, capfd):
    """On a CPU the pipeline's helper thread fights torch's threads for the cores: the task says so in one line
    (a fake evaluator, which has no CPU threads, gets no such line)."""
    over = FAST + ["selfplay.games_per_generation=2", "selfplay.pipeline=true", "selfplay.search_workers=0"]
    p = run_selfplay_task(tmp_path / "net", 0, 0, 1, None, over, device="cpu")
    err = capfd.readouterr().err
    assert p.status == "done" and err.count("selfplay.pipeline is on but the network runs on the CPU") == 1
    run_selfplay_task(tmp_path / "fake", 0, 0, 1, None, over, evaluator=UniformEvaluator(2))
    assert "selfplay.pipeline" not in capfd.readouterr().err


def test_games_with_no_recorded_position_are_counted_and_the_shards_stay_valid(tmp_path):
    """Playout caps record only fully searched moves: a short game can end before any of its moves was searched
    fully (the cluster preset searches a quarter of them fully, so some of 1,000 games in flight always do). Such a
    game has no rows but still counts: it once stopped the search worker that finished it."""
    run = tmp_path / "run"
    progress = run_selfplay_task(run, 0, 0, 1, None, [*FAST, "mcts.full_search_prob=0.05", "selfplay.max_plies=6",
                                                      "selfplay.games_per_generation=8"], device="cpu")
    assert progress.status == "done" and progress.games_in_shards == 8
    assert progress.device == "cpu"  # the network's device, in the record that azhpc status shows
    paths = RunPaths(run)
    rows = [read_shard(paths.shard(0, 0, k))[0] for k in paths.complete_shards(0, 0)]
    assert len(rows) == 4
    games = set()
    for data in rows:
        games.update(data.game_id.tolist())
        assert data.positions.bitboards.shape[1:] == (2, 8)
    assert len(games) < 8  # some games left no row (0.95 ** 6 of them, on average)
    assert any(len(d.value_target) == 0 for d in rows)  # and a whole shard of such games was written
    assert progress.positions == sum(len(d.value_target) for d in rows)
