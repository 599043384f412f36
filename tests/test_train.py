import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from alphazero_hpc.net.checkpoint import load_model
from alphazero_hpc.config import load_config
from alphazero_hpc.launch.stages import torchrun_command
from alphazero_hpc.train.data import BatchPlan, ShardRef, replay_window
from alphazero_hpc.search.fakes import UniformEvaluator
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.progress import read_train_outcomes, read_train_slices
from alphazero_hpc.train.trainer import plan_steps
from alphazero_hpc.selfplay.task import run_selfplay_task

from .conftest import TINY, run_cli, torchrun_leftovers

DATA = ["selfplay.games_per_generation=16", "selfplay.games_per_shard=2", "selfplay.max_plies=60",
        "mcts.simulations=12", "train.batch_size=32", "train.checkpoint_every=5"]


def make_run(path: Path, extra=()) -> RunPaths:
    # Self-play with a uniform evaluator is fast and gives real search targets to learn.
    run_selfplay_task(path, 0, 0, 1, TINY, [*DATA, *extra], evaluator=UniformEvaluator(2))
    return RunPaths(path)


def train(run: Path, *args, nproc=1, timeout=600, env=None):
    cmd = [sys.executable, "-m", "alphazero_hpc.train", "--run-dir", str(run), "--generation", "0"]
    if nproc > 1:  # the package's own torchrun command, with a log folder (else an /tmp/torchelastic_* per start)
        cmd = torchrun_command(str(run), 0, nproc, None, log_dir=str(run / "torchrun-logs"))
    cmd += ["--workers", "1", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def metric_rows(paths: RunPaths) -> list[dict]:
    return [json.loads(x) for x in (paths.train_dir(1) / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("data"), ["train.replay_ratio=2"])


def test_batch_plan_is_deterministic_disjoint_and_resumable():
    shards = [ShardRef(f"s{i}", 50 + i, 0) for i in range(5)]
    plan = BatchPlan(shards, 16, seed=(1, 2, 3), group=2)
    it = plan.batches()
    first = [next(it) for _ in range(40)]
    resumed = plan.batches(start=25)
    for number, s, r in first[25:]:
        n2, s2, r2 = next(resumed)
        assert n2 == number and (s2 == s).all() and (r2 == r).all()
    # One epoch covers every row exactly once (up to the carried remainder).
    total = sum(x.rows for x in shards)
    seen = {(int(a), int(b)) for _, s, r in first[: total // 16] for a, b in zip(s, r)}
    assert len(seen) == (total // 16) * 16


def test_two_rank_gloo_ddp_keeps_weights_identical_and_only_rank0_writes(tmp_path):
    paths = make_run(tmp_path)
    res = train(tmp_path, nproc=2)
    assert res.returncode == 0, res.stderr[-3000:]
    sums = re.findall(r"\[train rank (\d)\] finished (\d+) steps, weight sum ([-+.0-9e]+)", res.stdout + res.stderr)
    assert len(sums) == 2 and sums[0][1] == sums[1][1]
    assert sums[0][2] == sums[1][2], "ranks diverged: gradients were not synchronised"
    steps = plan_steps(load_config(paths.config), paths, 0)
    assert int(sums[0][1]) == steps
    assert [r["step"] for r in metric_rows(paths)] == list(range(1, steps + 1))  # one writer, each step once
    model, payload = load_model(paths.model(1))
    assert payload["steps"] == steps and payload["generation"] == 1


def test_a_training_stage_of_one_rank_on_one_node_starts_the_rank_without_torchrun(tmp_path):
    """torchrun's agent is one more process importing torch at every start, and one rank on one node has no one to
    meet: the stage starts the rank itself; with several ranks or nodes, torchrun (c10d rendezvous across nodes)."""
    out = tmp_path / "outcomes"
    alone = torchrun_command(str(tmp_path), 3, 1, None, out)
    assert alone[1:3] == ["-m", "alphazero_hpc.train"] and alone[-2:] == ["--outcomes", str(out)], alone
    assert torchrun_command(str(tmp_path), 3, 1, (1, 0, "n1", "77"), out)[1:3] == ["-m", "alphazero_hpc.train"]
    for nproc, slurm in ((2, None), (1, (2, 0, "n1", "77")), (4, (1, 0, "n1", "77"))):
        cmd = torchrun_command(str(tmp_path), 3, nproc, slurm, out)
        assert cmd[1:3] == ["-m", "torch.distributed.run"] and "alphazero_hpc.train" in cmd, (nproc, slurm, cmd)
    assert "--rdzv-endpoint=n1:29477" in torchrun_command(str(tmp_path), 3, 1, (2, 0, "n1", "77"), out)


def test_a_lone_rank_is_a_world_of_one_inside_a_step_of_many_tasks(tmp_path, monkeypatch, capfd):
    """Without torchrun nothing sets RANK/WORLD_SIZE, and a rank inside an srun step of 8 tasks (a local launch from
    an interactive allocation) would read a world of 8 from SLURM and wait for 7 ranks that never come: the stage
    gives the lone rank its world of one."""
    from alphazero_hpc.launch.stages import _run_torchrun

    for key, value in {"SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "8", "SLURM_PROCID": "3"}.items():
        monkeypatch.setenv(key, value)
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    probe = ["-c", "from alphazero_hpc.train.trainer import dist_env; e = dist_env(); print('world', e.rank, e.world)",
             "--outcomes", str(tmp_path / "outcomes")]
    for lone, seen in ((True, "world 0 1"), (False, "world 3 8")):  # without it, SLURM's count (the bug it prevents)
        code, _, _ = _run_torchrun([sys.executable, *probe], lone=lone)
        assert code == 0 and seen in capfd.readouterr().out, lone


def test_cli_training_on_two_ranks_writes_the_network_and_leaves_no_torchrun_folder(tmp_path):
    """``azhpc train --nproc-per-node 2`` starts torchrun itself: its log folder (an /tmp/torchelastic_* per start
    without one of ours) must be gone when it returns, as after a training stage."""
    paths = make_run(tmp_path / "run")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    res = run_cli("train", str(paths.root), "--generation", "0", "--nproc-per-node", "2", "--loader-workers", "1",
                  env={"TMPDIR": str(tmp)}, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert load_model(paths.model(1))[1]["generation"] == 1
    assert not torchrun_leftovers(tmp), torchrun_leftovers(tmp)


def test_a_killed_slices_torchrun_folder_is_emptied_by_the_next_and_none_is_left(tmp_path):
    """The training stage's torchrun log folder is in the run folder: a slice killed before its end (SIGKILL, a lost
    node) leaves it there, not in the node's /tmp, and the next slice's start clears it; its end removes it."""
    from alphazero_hpc.launch.stages import torchrun_logs

    folder = RunPaths(tmp_path).torchrun_logs(1, 0)
    (folder / "7_abc" / "attempt_0").mkdir(parents=True)  # what a killed agent left
    with torchrun_logs(folder) as logs:
        assert Path(logs) == folder and not any(folder.iterdir())
        (folder / "8_def").mkdir()
    assert not folder.exists() and folder.parent.exists()
    with torchrun_logs() as logs:  # no folder given (azhpc train): a temporary one
        assert Path(logs).is_dir()
    assert not Path(logs).exists()


def test_sigkill_mid_training_then_resume_finishes_the_same_steps(tmp_path):
    paths = make_run(tmp_path, ["train.replay_ratio=6"])
    steps = plan_steps(load_config(paths.config), paths, 0)
    cmd = [sys.executable, "-m", "alphazero_hpc.train", "--run-dir", str(tmp_path), "--generation", "0", "--workers", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = paths.train_dir(1) / "state.pt"
    deadline = time.time() + 300
    while not state.exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not paths.model(1).exists(), "the kill must land mid-run"
    saved = torch.load(state, weights_only=True)["step"]
    assert 0 < saved < steps
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"resuming at step {saved}/{steps}" in res.stdout
    _, payload = load_model(paths.model(1))
    assert payload["steps"] == steps
    assert [r["step"] for r in metric_rows(paths)] == list(range(1, steps + 1))
    assert not state.exists()  # pruned once the network is written (train.keep_states)
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "nothing to do" in again.stdout


def test_a_corrupt_new_shard_is_set_aside_played_again_then_trained(tmp_path):
    """A shard of the generation being trained that does not open (truncated here): training stops before its
    first step with one line, sets the shard aside and marks its task stopped; the task's rerun (what resume
    runs) plays just that shard again, and training then trains on every game exactly once."""
    import h5py

    from alphazero_hpc.store.progress import read_task_progress

    paths = make_run(tmp_path)
    victim = paths.shard(0, 0, 3)
    victim.write_bytes(victim.read_bytes()[:300])
    res = train(tmp_path)
    assert res.returncode == 1, res.stderr[-2000:]
    line = [x for x in res.stderr.splitlines() if "cannot be read" in x]
    assert len(line) == 1 and str(victim) in line[0] and "truncated or corrupt" in line[0] and "azhpc resume plays them again" in line[0]
    assert "Traceback" not in res.stderr and not paths.model(1).exists()
    assert victim.with_name(victim.name + ".bad").exists() and 3 not in paths.complete_shards(0, 0)
    progress = read_task_progress(paths.progress(0, 0))
    assert progress is not None and progress.status == "stopped" and "shard 3 set aside" in progress.error
    run_selfplay_task(tmp_path, 0, 0, 1, TINY, DATA, evaluator=UniformEvaluator(2))
    progress = read_task_progress(paths.progress(0, 0))
    assert progress is not None and progress.status == "done"
    games = []
    for k in paths.complete_shards(0, 0):
        with h5py.File(paths.shard(0, 0, k)) as f:
            games += sorted(set(f["game_id"][:].tolist()))
    assert sorted(games) == list(range(16))  # every game once: the replayed shard holds the games it held
    res = train(tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert paths.model(1).exists()


def test_a_corrupt_shard_of_an_older_generation_is_skipped(tmp_path):
    """A shard of an older generation in the window (trained on already) that fails when read: set aside and
    skipped, and the generation trains."""
    paths = make_run(tmp_path, ["train.window_generations=2"])
    run_selfplay_task(tmp_path, 1, 0, 1, TINY, [*DATA, "train.window_generations=2"], evaluator=UniformEvaluator(2))
    res = train(tmp_path)  # generation 0 -> network 1
    assert res.returncode == 0, res.stderr[-2000:]
    victim = paths.shard(0, 0, 3)
    victim.write_bytes(victim.read_bytes()[:300])
    res = train(tmp_path, "--generation", "1")
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"skipping shard {victim}" in res.stderr and "truncated or corrupt" in res.stderr
    assert paths.model(2).exists()


def test_too_much_corrupt_data_stops_with_a_clear_error(tmp_path):
    paths = make_run(tmp_path)
    for k in paths.complete_shards(0, 0):
        paths.shard(0, 0, k).write_bytes(b"garbage")
    res = train(tmp_path)
    assert res.returncode == 1
    assert "cannot be read" in res.stderr and "azhpc resume plays them again" in res.stderr
    assert not paths.model(1).exists() and paths.complete_shards(0, 0) == []


def test_training_learns_a_fixed_set_of_positions(dataset):
    # A run with a long replay ratio over few positions: memorising them must drive the losses down. At 20 passes
    # (460 steps) the policy loss ended at 0.39 of its start, the value loss near 0 (Zen 4, 2026-12-07); 40 passes
    # (0.35) doubled the test's time for no firmer verdict
    run = dataset.root.parent / "learn"
    make_run(run, ["train.replay_ratio=20", "train.lr=0.1"])
    res = train(run)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = metric_rows(RunPaths(run))
    first = sum(r["policy_loss"] for r in rows[:5]) / 5
    last = sum(r["policy_loss"] for r in rows[-5:]) / 5
    vfirst = sum(r["value_loss"] for r in rows[:5]) / 5
    vlast = sum(r["value_loss"] for r in rows[-5:]) / 5
    assert last < 0.6 * first, (first, last)
    assert vlast < 0.7 * vfirst, (vfirst, vlast)
    assert rows[-1]["top1_agreement"] > rows[0]["top1_agreement"]


def test_window_reads_sidecars_only(dataset, monkeypatch):
    import h5py

    def boom(*a, **k):
        raise AssertionError("planning opened an HDF5 file")

    monkeypatch.setattr(h5py, "File", boom)
    refs = replay_window(dataset, 0, 4)
    assert len(refs) == 8 and all(r.rows > 0 for r in refs)


def test_persistently_non_finite_loss_stops_and_leaves_no_checkpoint(tmp_path):
    paths = make_run(tmp_path, ["train.lr=1e30"])
    res = train(tmp_path)
    assert res.returncode == 1
    assert "not finite" in res.stderr and "lower train.lr" in res.stderr
    assert not paths.model(1).exists()


def test_window_by_positions_keeps_the_newest_shards(dataset):
    full = replay_window(dataset, 0, 4)
    cap = full[0].rows + full[1].rows
    kept = replay_window(dataset, 0, 4, window_positions=cap)
    assert kept == full[:2]


def test_stop_signal_saves_state_then_the_rerun_finishes_like_an_uninterrupted_run(tmp_path):
    """USR2 to a training stage (what SLURM sends before the time limit, or on preemption): both ranks stop
    at the same step, the state is saved, the stage exits 75 (requeue me); the rerun ends with the same steps
    and the same weights as a run that was never stopped."""
    from alphazero_hpc.net.checkpoint import ensure_initial_checkpoint

    runs = {}
    for name in ("clean", "stopped"):
        paths = make_run(tmp_path / name, ["train.replay_ratio=6", "train.loader_workers=1"])
        ensure_initial_checkpoint(paths.model(0), load_config(paths.config).model, 0)
        runs[name] = paths
    steps = plan_steps(load_config(runs["clean"].config), runs["clean"], 0)
    cmd = lambda p: [sys.executable, "-m", "alphazero_hpc.launch.stages", "train", str(p.root), "0", "--nproc-per-node", "2"]  # noqa: E731
    clean = subprocess.run(cmd(runs["clean"]), capture_output=True, text=True, timeout=600)
    assert clean.returncode == 0, clean.stderr[-3000:]

    paths = runs["stopped"]
    proc = subprocess.Popen(cmd(paths), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = paths.train_dir(1) / "metrics.jsonl"
    deadline = time.time() + 300
    while not (metrics.exists() and len(metrics.read_text().splitlines()) >= 3) and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGUSR2)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 75, err[-3000:]
    assert not paths.model(1).exists(), "the stop must land mid-run"
    saved = torch.load(paths.train_dir(1) / "state.pt", weights_only=True)["step"]
    assert err.count(f"stopped at step {saved}/{steps}") == 2 and 3 <= saved < steps
    outcomes = read_train_outcomes(paths.train_outcomes(1, 0))  # how each rank ended, as the stage read it
    assert [(o.status, o.rank, o.step, o.steps) for o in outcomes] == [("stopped", 0, saved, steps), ("stopped", 1, saved, steps)]
    assert json.loads(paths.train_progress(1).read_text())["status"] == "stopped"

    res = subprocess.run(cmd(paths), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"resuming at step {saved}/{steps}" in res.stdout
    assert [(o.status, o.step) for o in read_train_outcomes(paths.train_outcomes(1, 0))] == [("done", steps)] * 2
    assert [r["step"] for r in metric_rows(paths)] == list(range(1, steps + 1))
    slices = read_train_slices(paths.train_slices(1))  # the two slices on record, the second from where the first saved
    assert [(s["start_step"], s["end_step"], s["ended"]) for s in slices] == [
        (0, saved, "stopped: signal SIGUSR2"), (saved, steps, "done")], slices
    sums = {name: re.findall(r"\[train rank 0\] finished (\d+) steps, weight sum ([-+.0-9e]+)", text)
            for name, text in (("clean", clean.stdout), ("stopped", res.stdout))}
    assert sums["clean"] == sums["stopped"] == [(str(steps), sums["clean"][0][1])]


@pytest.mark.parametrize("mine, theirs, expected", [
    ("", 12.0, "signal SIGUSR2"),  # the other rank saw USR2 first: this one records the signal, not "another rank"
    ("", 1.0, "another rank stopped"),  # the other rank's own reason (its time-limit margin) has no signal to name
    ("signal SIGUSR2", 15.0, "signal SIGUSR2"),  # a rank keeps its own reason
    ("", 0.0, ""),
])
def test_ranks_agree_on_a_stop_and_name_the_signal_whichever_rank_saw_it_first(monkeypatch, mine, theirs, expected):
    """Under load SLURM's USR2 reached one rank a step before the other, and rank 0 recorded the slice as ended by
    "another rank stopped" instead of the signal (the suite's stop-signal test failed on a loaded 2-core host)."""
    from types import SimpleNamespace

    import torch.distributed as dist

    from alphazero_hpc.train.trainer import Trainer

    sent = []

    def all_reduce(flags, op=None):  # noqa: ARG001 - the other rank's flags, combined by MAX
        sent.append(flags.tolist())
        flags[1] = max(float(flags[1]), theirs)

    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    rank = SimpleNamespace(env=SimpleNamespace(world=2), device=torch.device("cpu"))
    assert Trainer._agree(rank, True, mine) == (True, expected)  # type: ignore[arg-type]  # a rank of two, no process group
    assert sent == [[0.0, 12.0 if mine else 0.0]]  # what this rank told the other: USR2's number


def test_a_shard_shorter_than_its_sidecar_is_set_aside_and_played_again(tmp_path):
    import json

    paths = make_run(tmp_path)
    sidecar = paths.sidecar(0, 0, 2)
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**meta, "rows": meta["rows"] + 500}))  # was: IndexError in the data loader
    res = train(tmp_path)
    assert res.returncode == 1, res.stderr[-2000:]
    assert f"{meta['rows']} rows, its sidecar says {meta['rows'] + 500}" in res.stderr and "Traceback" not in res.stderr
    assert paths.shard(0, 0, 2).with_name("shard-00002.h5.bad").exists() and not sidecar.exists()
    run_selfplay_task(tmp_path, 0, 0, 1, TINY, DATA, evaluator=UniformEvaluator(2))  # what resume runs
    assert json.loads(sidecar.read_text())["rows"] == meta["rows"]
    res = train(tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert paths.model(1).exists()


def test_lr_decays_by_generation(tmp_path):
    """train.lr_decay: generation G trains at lr * batch / 256 * lr_decay**G (generation 0 after its warm-up)."""
    extra = ["train.lr_decay=0.5", "train.lr=0.08"]
    paths = make_run(tmp_path, extra)
    run_selfplay_task(tmp_path, 1, 0, 1, TINY, [*DATA, *extra], evaluator=UniformEvaluator(2))
    for g in (0, 1):
        res = train(tmp_path, "--generation", str(g))
        assert res.returncode == 0, res.stderr[-2000:]
    rates = [[json.loads(x)["lr"] for x in (paths.train_dir(g) / "metrics.jsonl").read_text().splitlines()] for g in (1, 2)]
    assert rates[0][-1] == pytest.approx(0.08 * 32 / 256) and rates[1] == pytest.approx([0.08 * 32 / 256 * 0.5] * len(rates[1]))


def test_pretraining_lr_schedules():
    """Warm-up over the first 5% of pretraining's steps, then constant, or with pretrain.lr_schedule=cosine a half
    cosine that ends at 1% on the last step; a self-play generation's schedule ignores the setting."""
    from alphazero_hpc.train.trainer import PRETRAIN, lr_factor

    constant, cosine = lr_factor(1000, PRETRAIN, "constant"), lr_factor(1000, PRETRAIN, "cosine")
    assert constant(0) == cosine(0) == pytest.approx(1 / 50) and constant(49) == cosine(49) == 1.0
    assert [constant(s) for s in (100, 500, 999)] == [1.0] * 3
    decay = [cosine(s) for s in range(49, 1000)]
    assert all(a >= b for a, b in zip(decay, decay[1:])) and decay[-1] == pytest.approx(0.01)
    assert cosine(524) == pytest.approx(0.505, abs=0.01)  # half way through the decay
    assert [lr_factor(1000, 3, "cosine")(s) for s in (0, 500, 999)] == [1.0] * 3


def _later_by_hand(game, ply, root, result, horizon):
    """later_value's definition, one row at a time."""
    out = []
    for i in range(len(game)):
        ahead = [j for j in range(len(game)) if game[j] == game[i] and ply[j] >= ply[i] + horizon]
        if not ahead:
            out.append(float(result[i]))
            continue
        j = min(ahead, key=lambda k: ply[k])
        out.append(float(root[j]) * (1 if (ply[j] - ply[i]) % 2 == 0 else -1))
    return np.array(out, np.float32)


def test_later_value_reads_the_same_game_further_on_from_the_rows_side():
    from types import SimpleNamespace
    from typing import cast

    from alphazero_hpc.store.shards import ShardData
    from alphazero_hpc.train.data import later_value

    # one game, plies 0 1 3 4 recorded: ply 0 reads ply 3 (other side to move: negated), ply 1 reads ply 3 as it is
    # stored, plies 3 and 4 have nothing 2 plies on and read the result
    # (SimpleNamespaces with only the columns later_value reads stand in for ShardData)
    one = cast(ShardData, SimpleNamespace(game_id=np.zeros(4, np.uint32), ply=np.array([0, 1, 3, 4], np.uint16),
                                          root_value=np.array([0.1, 0.2, 0.5, -0.3], np.float16),
                                          value_target=np.array([1, -1, -1, 1], np.int8)))
    np.testing.assert_allclose(later_value(one, 2), [-0.5, 0.5, -1.0, 1.0], atol=1e-3)
    # many interleaved games, rows shuffled, plies with gaps: the same as the definition row by row
    rng = np.random.default_rng(5)
    game = np.repeat(np.arange(7), 30)
    ply = np.concatenate([np.sort(rng.choice(120, 30, replace=False)) for _ in range(7)])
    perm = rng.permutation(len(game))
    data = cast(ShardData, SimpleNamespace(game_id=game[perm].astype(np.uint32), ply=ply[perm].astype(np.uint16),
                                           root_value=rng.uniform(-1, 1, len(game)).astype(np.float16),
                                           value_target=rng.integers(-1, 2, len(game)).astype(np.int8)))
    for horizon in (1, 4, 9):
        want = _later_by_hand(data.game_id, data.ply, data.root_value, data.value_target, horizon)
        np.testing.assert_allclose(later_value(data, horizon), want, atol=1e-6)


def test_value_target_horizon_reaches_the_batches(dataset, monkeypatch):
    """The loader's value targets with ``train.value_target_horizon``: (1 - r) * result + r * the later value."""
    import alphazero_hpc.train.data as loader
    from alphazero_hpc.store.shards import read_shard
    from alphazero_hpc.train.data import WindowDataset, later_value

    refs = replay_window(dataset, 0, 1)[:1]
    data = read_shard(Path(refs[0].path))[0]
    data.root_value[:] = np.random.default_rng(0).uniform(-1, 1, len(data)).astype(np.float16)  # uniform net: all 0
    ds = WindowDataset(BatchPlan(refs, len(data), seed=(0,)), q_ratio=0.5, horizon=3)
    ds_rows = next(iter(BatchPlan(refs, len(data), seed=(0,)).batches()))[2]
    monkeypatch.setattr(loader, "read_shard", lambda path: (data, {}))  # these root values, not the shard's
    batch = next(iter(ds))
    wdl = batch["wdl"].numpy()
    expect = 0.5 * data.value_target[ds_rows].astype(np.float32) + 0.5 * later_value(data, 3)[ds_rows]
    np.testing.assert_allclose(wdl[:, 0] - wdl[:, 2], expect, atol=1e-5)
    assert np.abs(later_value(data, 3) - data.root_value.astype(np.float32)).max() > 0.1  # it is not the row's own


def test_white_material_counts_the_pieces_as_python_chess_does():
    import random

    import chess

    from alphazero_hpc.game.encoding import batch_from_chains, chain_for_board
    from alphazero_hpc.game.rules import material_balance
    from alphazero_hpc.train.data import white_material

    rng, boards = random.Random(3), []
    for _ in range(40):
        board = chess.Board()
        for _ in range(rng.randrange(0, 160)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        boards.append(board)
    batch = batch_from_chains([chain_for_board(b, 2) for b in boards], 2)
    want = [material_balance(b) for b in boards]
    assert len(set(want)) > 5  # the games differ in material, or the check proves little
    np.testing.assert_array_equal(white_material(batch.bitboards), want)


def _gain_by_hand(game, ply, white, turn, horizon):
    """material_gain's definition, one row at a time."""
    out = []
    for i in range(len(game)):
        same = [j for j in range(len(game)) if game[j] == game[i]]
        ahead = [j for j in same if ply[j] >= ply[i] + horizon]
        j = min(ahead, key=lambda k: ply[k]) if ahead else max(same, key=lambda k: ply[k])
        out.append((white[j] - white[i]) * (1 if turn[i] else -1))
    return np.array(out, np.float32)


def test_material_gain_reads_the_same_game_further_on_from_the_rows_side(monkeypatch):
    from types import SimpleNamespace
    from typing import cast

    import alphazero_hpc.train.data as loader
    from alphazero_hpc.store.shards import ShardData

    rng = np.random.default_rng(8)
    game = np.repeat(np.arange(6), 25)
    ply = np.concatenate([np.sort(rng.choice(100, 25, replace=False)) for _ in range(6)])
    perm = rng.permutation(len(game))
    white = rng.integers(-12, 13, len(game)).astype(np.float32)
    # a SimpleNamespace with only what material_gain reads stands in for ShardData (bitboards: balances, see below)
    data = cast(ShardData, SimpleNamespace(game_id=game[perm].astype(np.uint32), ply=ply[perm].astype(np.uint16),
                                           positions=SimpleNamespace(bitboards=white,
                                                                     turn=rng.integers(0, 2, len(game)).astype(bool))))
    monkeypatch.setattr(loader, "white_material", lambda bitboards: bitboards)  # the balances above, per row
    for horizon in (1, 4, 30):
        want = _gain_by_hand(data.game_id, data.ply, white, data.positions.turn, horizon)
        np.testing.assert_array_equal(loader.material_gain(data, horizon), want)
    assert np.abs(loader.material_gain(data, 4)).max() > 0


def test_the_material_head_learns_its_target_and_search_never_sees_it(tmp_path):
    """model.material_head: training reads a third output and logs its loss, which falls on a fixed set of positions;
    the network's plain forward (what search and evaluation call) returns policy and value only."""
    extra = ["model.material_head=true", "train.replay_ratio=20", "train.lr=0.1"]
    paths = make_run(tmp_path, extra)
    res = train(tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = metric_rows(paths)
    first = sum(r["material_loss"] for r in rows[:5]) / 5
    last = sum(r["material_loss"] for r in rows[-5:]) / 5
    assert last < 0.7 * first, (first, last)
    model, _ = load_model(paths.model(1))
    model.eval()
    stem = model.stem[0]
    assert isinstance(stem, torch.nn.Conv2d), stem
    x = torch.zeros(3, *stem.weight.shape[1:2], 8, 8)
    assert len(model(x)) == 2 and model(x, material=True)[2].shape == (3,)
    from alphazero_hpc.net.model import build_model

    plain = build_model(load_config(None, []).model)
    stem = plain.stem[0]
    assert isinstance(stem, torch.nn.Conv2d), stem
    with pytest.raises(ValueError, match="no material head"):
        plain(torch.zeros(1, *stem.weight.shape[1:2], 8, 8), material=True)
