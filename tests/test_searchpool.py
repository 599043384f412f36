"""Several search processes sharing one network server (searchpool): same games, dead workers, clean errors."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from alphazero_hpc.config import load_config
from alphazero_hpc.errors import AzhpcError
from alphazero_hpc.search.fakes import MaterialEvaluator, UniformEvaluator
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.progress import read_progress
from alphazero_hpc.selfplay.pool import SearchPool
from alphazero_hpc.tools.bench import measure_pool
from alphazero_hpc.store.shards import ShardData, read_shard
from alphazero_hpc.selfplay.task import run_selfplay_task, search_workers

from .conftest import ROOT, TINY, run_cli

FAST = ["selfplay.games_per_generation=12", "selfplay.games_per_shard=2", "selfplay.games_in_flight=3",
        "selfplay.max_plies=40", "mcts.simulations=8", "mcts.fast_simulations=2", "model.history=2"]


def _shards(run: Path) -> dict[str, ShardData]:
    return {p.name: read_shard(p)[0] for p in sorted((run / "selfplay").rglob("shard-*.h5"))}


class SlowMaterial(MaterialEvaluator):
    """Answers per row, slowly enough that requests pile up at the server; remembers its largest batch."""

    largest = 0

    def evaluate(self, planes):
        self.largest = max(self.largest, len(planes))
        time.sleep(0.002)
        return super().evaluate(planes)


@pytest.mark.parametrize("pipeline", [False, True])
def test_workers_play_the_same_games_as_one_process(tmp_path, pipeline):
    """Games are seeded per spec and the fake evaluator answers per row, so which worker plays a game and which
    leaves share its batches must not change a single byte of the training data. With the pipeline each worker
    has both halves of its slot out at once (no helper thread): a wrong row offset or an answer taken for the
    other half would change the games."""
    runs = {}
    for k in (0, 2):
        runs[k] = tmp_path / f"k{k}"
        ev = SlowMaterial(2) if k else MaterialEvaluator(2)
        over = FAST + [f"selfplay.search_workers={k}", f"selfplay.pipeline={str(pipeline and k > 0).lower()}"]
        p = run_selfplay_task(runs[k], 0, 1, 2, overrides=over, evaluator=ev)  # task 1 of 2: its seeds and share
        assert p.status == "done" and p.games_in_shards == 6 and p.search_workers == k
    assert isinstance(ev, SlowMaterial)  # k = 2's
    assert ev.largest > 2  # halves of 2 and 1 leaves, or one worker's 3: several requests shared batches
    assert len(p.search_worker_pids) == 2 and os.getpid() not in p.search_worker_pids
    one, two = _shards(runs[0]), _shards(runs[2])
    assert list(one) == list(two) and len(one) == 3
    for name in one:
        a, b = one[name], two[name]
        for key in ("policy_count", "policy_index", "policy_prob", "value_target", "root_value", "plies_left", "ply", "game_id"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=f"{name} {key}")
        for key, value in vars(a.positions).items():
            np.testing.assert_array_equal(value, getattr(b.positions, key), err_msg=f"{name} positions.{key}")
    meta = [json.loads(p.read_text()) for r in (runs[0], runs[2]) for p in sorted((r / "selfplay").rglob("shard-*.json"))]
    assert [m["stats"] for m in meta[:3]] == [m["stats"] for m in meta[3:]]
    single, pooled = (read_progress(RunPaths(r).progress(0, 1)) for r in (runs[0], runs[2]))
    assert single is not None and pooled is not None
    for key in ("positions", "games_in_shards", "simulations_this_attempt", "terminations"):
        assert single[key] == pooled[key], key


def test_server_merges_workers_leaves_and_workers_never_import_torch(tmp_path):
    cfg = load_config(TINY, ["selfplay.games_in_flight=8", "selfplay.server_max_wait_ms=50"])
    pool = SearchPool(UniformEvaluator(cfg.model.history), cfg, RunPaths(tmp_path), 0, 0, {}, 2, bench=True)
    r = measure_pool(pool, seconds=2.0, warmup_s=1.0)
    assert r["evaluations"] > 0 and r["simulations"] > 0
    assert r["evaluations"] / r["batches"] > 8  # one worker's leaves fill at most 8 rows: batches were merged
    assert r["torch_in_workers"] is False
    assert not pool.live()


def test_server_answers_workers_in_the_order_they_asked(tmp_path):
    """With one worker's leaves per batch (server_max_batch = games_in_flight), a batch goes to whoever asked
    first, and what is left over goes at once: a server that picked the lowest worker number, and waited for
    company before serving the rest, left worker 1 with ~10% of the simulations."""
    cfg = load_config(TINY, ["selfplay.games_in_flight=8", "selfplay.server_max_batch=8", "selfplay.server_max_wait_ms=5"])
    pool = SearchPool(UniformEvaluator(cfg.model.history), cfg, RunPaths(tmp_path), 0, 0, {}, 2, bench=True)
    r = measure_pool(pool, seconds=3.0, warmup_s=1.0)
    assert r["evaluations"] / r["batches"] <= 8
    sims = [s.counters[0] for s in pool.slots]
    assert min(sims) > 0.3 * sum(sims), sims


def test_worker_error_fails_the_task_with_its_message(tmp_path):
    run = tmp_path / "run"
    (RunPaths(run).task_dir(0, 0) / "shard-00001.h5").mkdir(parents=True)  # the worker cannot write shard 1
    t0 = time.monotonic()
    with pytest.raises(AzhpcError, match=r"search worker \d \(pid \d+\) failed: .*shard-00001\.h5"):
        run_selfplay_task(run, 0, 0, 1, overrides=FAST + ["selfplay.search_workers=2"], evaluator=MaterialEvaluator(2))
    assert time.monotonic() - t0 < 60
    p = read_progress(RunPaths(run).progress(0, 0))
    assert p is not None and p["status"] == "failed" and "search worker" in p["error"]
    for pid in p["search_worker_pids"]:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def _start_task(run: Path, *sets: str) -> subprocess.Popen:
    azhpc = Path(sys.executable).parent / "azhpc"
    args = [str(azhpc), "selfplay", "--run-dir", str(run), "--config", str(TINY), "--set", "selfplay.search_workers=2",
            "--set", "selfplay.games_per_generation=16", "--set", "selfplay.games_per_shard=4",
            "--set", "selfplay.games_in_flight=4", "--set", "selfplay.max_plies=60", "--device", "cpu"]
    for s in sets:
        args += ["--set", s]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "AZHPC_TORCH_THREADS": "1"})


def _wait_for_workers(run: Path, proc: subprocess.Popen, games: int = 1) -> dict:
    t_end = time.monotonic() + 120
    while time.monotonic() < t_end:
        p = read_progress(RunPaths(run).progress(0, 0)) or {}
        if len(p.get("search_worker_pids", [])) == 2 and p.get("games_done", 0) >= games:
            return p
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the task's workers did not start")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_killed_worker_is_reported_and_replaced(tmp_path):
    run = tmp_path / "run"
    proc = _start_task(run)
    p = _wait_for_workers(run, proc)
    victim = p["search_worker_pids"][0]
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    assert f"(pid {victim}) was killed by SIGKILL" in err and "restarting it (1 of 2)" in err
    final = read_progress(RunPaths(run).progress(0, 0))
    assert final is not None and final["status"] == "done" and final["search_worker_restarts"] == 1
    assert final["games_in_shards"] == 16 and victim not in final["search_worker_pids"]
    shown = run_cli("status", str(run))
    assert shown.returncode == 0 and "search workers restarted 1x" in shown.stdout, shown.stdout
    shards = _shards(run)
    assert len(shards) == 4
    assert final["positions"] == sum(len(s) for s in shards.values())
    assert not list(run.rglob("*.tmp"))


@pytest.mark.slow
def test_worker_deaths_beyond_the_limit_end_the_task_with_one_clear_line(tmp_path):
    run = tmp_path / "run"
    proc = _start_task(run, "selfplay.search_worker_restarts=0")
    p = _wait_for_workers(run, proc)
    victim, other = p["search_worker_pids"]
    os.kill(victim, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    last = err.strip().splitlines()[-1]
    assert f"search worker 0 (pid {victim}) was killed by SIGKILL" in last and "selfplay.search_worker_restarts" in last
    final = read_progress(RunPaths(run).progress(0, 0))
    assert final is not None and final["status"] == "failed" and "killed by SIGKILL" in final["error"]
    assert not _alive(other)
    for name, shard in _shards(run).items():  # what was written is complete; the rest is played on the next run
        assert len(shard) > 0, name
    assert not list(run.rglob("*.tmp"))


@pytest.mark.slow
def test_workers_exit_when_the_server_is_killed(tmp_path):
    run = tmp_path / "run"
    proc = _start_task(run)
    p = _wait_for_workers(run, proc)
    proc.kill()
    proc.communicate(timeout=30)
    t_end = time.monotonic() + 30
    while any(_alive(pid) for pid in p["search_worker_pids"]) and time.monotonic() < t_end:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in p["search_worker_pids"]), "search workers outlived their server"


def test_search_workers_auto_is_slurms_cpus_minus_one(monkeypatch):
    cfg = load_config(None, [])
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    assert cfg.selfplay.search_workers == -1 and search_workers(cfg) == 0
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "12")
    assert search_workers(cfg) == 11
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    assert search_workers(cfg) == 0
    assert search_workers(load_config(None, ["selfplay.search_workers=3"])) == 3
