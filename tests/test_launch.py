"""azhpc launch / status: the plan, the sbatch scripts, the local pipeline and the chain on a real SLURM cluster."""

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest
import yaml

from alphazero_hpc.net.checkpoint import file_digest, read_checkpoint
from alphazero_hpc.config import load_config
from alphazero_hpc.errors import AzhpcError
from alphazero_hpc.launch.plan import make_plan, split_tasks
from alphazero_hpc.cluster import procs
from alphazero_hpc.launch.record import SupervisorRecord, azhpc_process_alive, pid_alive, supervisor_holder
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.train.trainer import plan_steps

from .conftest import (SLURM_USER, TINY, as_user, cluster_report, run_cli, slurm_cli, torchrun_leftovers,
                       user_jobs)

# A quick tiny run: 16 games of at most 40 plies per generation, 8 per shard.
QUICK = ["--config", str(TINY), "--set", "selfplay.max_plies=40", "--set", "train.loader_workers=0"]


def disk_truth(run: Path, generation: int) -> dict:
    """Games, positions and shards of a generation, counted from the HDF5 files themselves; ``duplicates``:
    games (task, game id) found in more than one shard; ``partial``: temporaries or shards without a sidecar."""
    games = rows = shards = 0
    models: set[str] = set()
    seen: set[tuple[int, int]] = set()
    duplicates = 0
    folder = run / "selfplay" / f"gen-{generation:04d}"
    for path in sorted(folder.glob("task-*/shard-*.h5")):
        with h5py.File(path, "r") as f:
            games += int(f.attrs["games"])
            rows += f["value_target"].shape[0]
            models.add(f.attrs["model_sha256"])
            ids = {(int(f.attrs["task"]), int(g)) for g in set(f["game_id"][:].tolist())}
            assert len(ids) == int(f.attrs["games"]), path
        duplicates += len(ids & seen)
        seen |= ids
        shards += 1
    partial = [p for p in folder.glob("task-*/*") if p.suffix == ".tmp" or (p.suffix == ".h5" and not p.with_suffix(".json").exists())]
    return {"games": games, "positions": rows, "shards": shards, "models": models, "duplicates": duplicates, "partial": partial}


def status_json(run: Path) -> dict:
    res = run_cli("status", str(run), "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def check_status_matches_disk(run: Path, generations: int) -> dict:
    st = status_json(run)
    assert len(st["generations"]) == generations
    for gen in st["generations"]:
        g = gen["generation"]
        truth = disk_truth(run, g)
        sp = gen["selfplay"]
        assert (sp["games"], sp["positions"], sp["shards"]) == (truth["games"], truth["positions"], truth["shards"])
        assert sp["done"] == sp["tasks"] and sp["failed"] == 0
        assert gen["train"]["checkpoint"] == str(run / "models" / f"gen-{g + 1:04d}.pt")
        # generation g's self-play played generation g's network (generation 1 loads what training 0 wrote)
        assert truth["models"] == {file_digest(run / "models" / f"gen-{g:04d}.pt")}
    # torchrun's log folders (one a node, in the run folder) go when training ends, a killed slice's with the next
    assert not list(run.glob("train/*/torchrun-logs*")), list(run.glob("train/*/torchrun-logs*"))
    return st


def test_split_tasks_respects_max_array_size():
    assert split_tasks(16, 1001) == [range(0, 16)]
    parts = split_tasks(2500, 1001)
    assert [len(p) for p in parts] == [1001, 1001, 498]
    assert [t for p in parts for t in p] == list(range(2500))


def test_time_left_parsing_covers_squeue_formats():
    from alphazero_hpc.cluster.preempt import parse_time_left

    assert [parse_time_left(x) for x in ("0:42", "12:03", "1:00:00", "2-03:04:05", "UNLIMITED", "INVALID", "")] == [
        42, 12 * 60 + 3, 3600, ((2 * 24 + 3) * 60 + 4) * 60 + 5, None, None, None]


def test_plan_rejects_what_would_fail_later():
    cfg = load_config(TINY, ["slurm.nodes=2", "slurm.gpus_per_node=3"])  # 6 ranks, batch 64
    with pytest.raises(AzhpcError, match="does not split over 6 training ranks"):
        make_plan(cfg, "slurm")
    with pytest.raises(AzhpcError, match="below the 32 self-play tasks"):
        make_plan(load_config(TINY, ["slurm.selfplay_tasks=32"]), "slurm")
    with pytest.raises(AzhpcError, match="needs a cluster"):
        make_plan(load_config(TINY, ["slurm.nodes=2"]), "local", local_cpus=2)
    plan = make_plan(load_config(TINY, ["slurm.nodes=2", "slurm.gpus_per_node=2"]), "slurm")
    assert (plan.tasks, plan.world_size) == (4, 4)
    local = make_plan(load_config(TINY), "local", local_gpus=0, local_cpus=2)
    assert (local.tasks, local.parallel, local.world_size) == (2, 2, 1)


def test_dry_run_two_nodes_eight_gpus(tmp_path):
    res = run_cli("launch", "--cluster", "slurm", "--dry-run", "--config", "configs/cluster.yaml", "--nodes", "2",
                  "--gpus-per-node", "8", "--generations", "2", "--partition", "gpu", "--account", "proj-1",
                  "--qos", "high", "--run-dir", str(tmp_path / "run"))
    assert res.returncode == 0, res.stderr
    scripts = res.stdout.split("# ===== ")[1:]
    assert len(scripts) == 4  # 2 x (array, training)
    sp0, tr0, sp1, tr1 = scripts
    ids = {}
    for name, script in (("sp0", sp0), ("tr0", tr0), ("sp1", sp1), ("tr1", tr1)):
        for opt in ("--partition=gpu", "--account=proj-1", "--qos=high", "--ntasks-per-node=1"):
            assert f"#SBATCH {opt}\n" in script, (name, opt)
        assert "export HDF5_USE_FILE_LOCKING=FALSE" in script
        assert "srun" in script and "submitit.core._submit" in script
        ids[name] = script.split("=====")[0]
    for sp in (sp0, sp1):
        assert "#SBATCH --array=0-15%16\n" in sp  # one task per GPU
        assert "#SBATCH --gpus-per-node=1\n" in sp and "#SBATCH --cpus-per-task=12\n" in sp
        assert "#SBATCH --time=240\n" in sp and "#SBATCH --nodes=1\n" in sp
    for tr in (tr0, tr1):
        assert "#SBATCH --nodes=2\n" in tr and "#SBATCH --gpus-per-node=8\n" in tr and "#SBATCH --cpus-per-task=96\n" in tr
        assert "#SBATCH --time=120\n" in tr and "#SBATCH --kill-on-invalid-dep=yes\n" in tr
        assert "--nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d" in tr.replace("--nproc-per-node=8 --nnodes=2", "--nnodes=2 --nproc-per-node=8")
    assert "--dependency" not in sp0
    assert "#SBATCH --dependency=afterany:900001\n" in tr0
    assert "#SBATCH --dependency=afterok:900002\n" in sp1
    assert "#SBATCH --dependency=afterany:900003,afterok:900002\n" in tr1
    assert not (tmp_path / "run").exists(), "a dry run must not write the run folder"


def test_launch_rejects_unsafe_values_in_one_line(tmp_path):
    res = run_cli("launch", "--cluster", "slurm", "--dry-run", "--config", str(TINY), "--partition", "gpu; rm -rf ~",
                  "--run-dir", str(tmp_path / "r"))
    assert res.returncode == 1
    assert len(res.stderr.strip().splitlines()) == 1 and "slurm.partition" in res.stderr


# The evaluation stage, as small as it gets: 2 games against each opponent, 4 simulations, 20 plies.
EVAL_QUICK = ["--set", "eval.enabled=true", "--set", "eval.games=2", "--set", "eval.simulations=4", "--set", "eval.max_plies=20"]


def check_evaluated(run: Path, st: dict, generations: int) -> None:
    """Every trained network played previous and random once (ledger), and status shows it."""
    ledger = [json.loads(x) for x in (run / "eval" / "ledger.jsonl").read_text().splitlines()]
    pairs = sorted((e["player"], e["opponent"]) for e in ledger)
    assert pairs == sorted([(f"gen:{g}", f"gen:{g - 1}") for g in range(1, generations + 1)]
                           + [(f"gen:{g}", "random") for g in range(1, generations + 1)]), pairs
    assert all(e["games"] == 2 for e in ledger)
    for gen in st["generations"]:
        assert gen["eval"]["state"] == "done" and len(gen["eval"]["matches"]) == 2, gen["eval"]


@pytest.mark.slow
def test_local_pipeline_two_generations(tmp_path):
    run = tmp_path / "run"
    tmp = tmp_path / "tmp"  # the run's temporary files: nothing of torchrun's may be left there (its log folders were, one a generation)
    tmp.mkdir()
    res = run_cli("launch", "--cluster", "local", "--generations", "2", "--run-dir", str(run), "--wait", *QUICK, *EVAL_QUICK,
                  timeout=600, env={"TMPDIR": str(tmp)})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "done:" in res.stdout
    assert not torchrun_leftovers(tmp), torchrun_leftovers(tmp)
    st = check_status_matches_disk(run, 2)  # none in the run either
    assert st["supervisor"]["state"] == "done"
    record = json.loads((run / "launch.json").read_text())
    stages = [(j["generation"], j["stage"], j["state"]) for j in record["jobs"]]
    tasks = record["plan"]["tasks"]
    assert stages == ([(0, "selfplay", "done")] * tasks + [(0, "train", "done"), (0, "eval", "done")]
                      + [(1, "selfplay", "done")] * tasks + [(1, "train", "done"), (1, "eval", "done")])
    check_evaluated(run, st, 2)
    shown = run_cli("status", str(run)).stdout
    assert "eval       gen:2 done: vs gen:1 +" in shown
    # a match at other simulations than the run's eval.simulations is shown with its setup, beside the stage's own
    other = run_cli("evaluate", str(run), "--generation", "2", "--opponent", "random", "--games", "2", "--simulations", "2")
    assert other.returncode == 0, other.stderr
    line = next(x for x in run_cli("status", str(run)).stdout.splitlines() if "eval       gen:2 done:" in x)
    assert re.search(r"; @[a-z]+2 vs random \+", line) and re.search(r"done: vs gen:1 \+", line), line
    assert "games/s" not in shown  # a live rate; "0.00 games/s" beside a finished generation read as a stall
    plots = run_cli("plot", str(run))
    assert plots.returncode == 0, plots.stderr
    assert not (run / "eval" / "ratings.json").exists()  # a plot reads the ladder; only azhpc elo records it
    for name in ("elo", "losses", "games"):
        assert (run / "plots" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert read_checkpoint(run / "models" / "gen-0002.pt")["generation"] == 2
    again = run_cli("launch", "--cluster", "local", "--run-dir", str(run), *QUICK)
    assert again.returncode == 1 and "already launched" in again.stderr


def _progress_mark(st: dict) -> tuple:
    """What moves while a run works: positions and games per task, training steps, attempts and job states."""
    return tuple((g["selfplay"]["positions"], tuple((t["games"], t["positions"], t["attempt"]) for t in g["selfplay"]["task_rows"]),
                  g["train"]["step"], g["train"]["attempt"], tuple(j["state"] for j in g["jobs"])) for g in st["generations"])


def still_patient(start: float, timeout: float, moving: bool = False) -> bool:
    """Whether a wait begun at ``start`` goes on: within ``timeout`` (a quiet machine's time, with room), and past it
    up to three times as long while what it waits on still moves (``moving``, where the caller can tell) or the
    machine is busier than its cores (1-minute load average): a loaded machine is slow to start a task's Python and
    torch and to run it, a task that never starts or a run that hangs still fails."""
    waited = time.time() - start
    return waited < timeout or (waited < 3 * timeout and (moving or os.getloadavg()[0] > (os.cpu_count() or 1)))


def wait_for_run(run: Path, timeout: float, stall: float = 180) -> dict:
    """Wait until no job of the run is alive: within ``timeout`` (what the run takes on a quiet machine, with room),
    and past it as ``still_patient`` allows, the run moving meaning a position, a step, an attempt or a job state
    changed in the last ``stall`` seconds."""
    start = last_move = time.time()
    mark = None
    while True:
        st = status_json(run)
        active = [j for g in st["generations"] for j in g["jobs"]
                  if any(s in j["state"] for s in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUE"))]
        if not active:
            return st
        now = time.time()
        if (now_mark := _progress_mark(st)) != mark:
            mark, last_move = now_mark, now
        if not still_patient(start, timeout, moving=now - last_move < stall):
            break
        time.sleep(3)
    subprocess.run(["scancel", "--name", f"azhpc-{run.name}-sp0"])
    pytest.fail(f"run {run} still has jobs after {now - start:.0f}s, the last change {now - last_move:.0f}s ago "
                f"(expected within {timeout}s):\n" + run_cli("status", str(run)).stdout + cluster_report())


def launch_slurm(run: Path, nodes: int, *extra: str, generations: int = 2) -> dict:
    """``azhpc launch --cluster slurm`` on the testbed (2 fake GPUs per node); the launch record."""
    res = slurm_cli("launch", "--cluster", "slurm", "--nodes", str(nodes), "--gpus-per-node", "2", "--generations", str(generations),
                  "--cpus-per-task", "1", "--run-dir", str(run), *QUICK, *extra)
    assert res.returncode == 0, res.stderr
    return json.loads((run / "launch.json").read_text())


LIVE_STATES = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "COMPLETING", "CONFIGURING",
               "SUSPENDED", "RESIZING"}


def still_queued(job_ids: set[str], timeout: float) -> list[str]:
    """Wait until neither squeue nor sacct has any of the jobs (or their array elements) alive; what is left
    after ``timeout``. Both: a job being requeued can be missing from squeue for a moment while sacct still
    says RUNNING."""
    deadline = time.time() + timeout
    while True:
        queued = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True).stdout.split()
        left = [j for j in queued if j.split("_")[0] in job_ids]
        if not left:
            left = [j for j, state in sacct_states(sorted(job_ids)).items() if state in LIVE_STATES]
        if not left or time.time() > deadline:
            return left
        time.sleep(1)


def wait_until_running(progress: Path, timeout: float = 120) -> dict:
    """A task's progress record once it says ``running``."""
    start = time.time()
    p: dict = {}
    while still_patient(start, timeout):
        p = json.loads(progress.read_text()) if progress.exists() else {}
        if p.get("status") == "running":
            return p
        time.sleep(0.2)
    pytest.fail(f"{progress} did not say running within {time.time() - start:.0f}s (status {p.get('status')!r}, "
                f"load average {os.getloadavg()[0]:.1f})" + cluster_report())


def wait_for_metrics(run: Path, generation: int, rows: int, timeout: float = 300) -> None:
    """Until training of ``generation`` has logged ``rows`` steps (and not finished)."""
    metrics = run / "train" / f"gen-{generation + 1:04d}" / "metrics.jsonl"
    start = time.time()
    while still_patient(start, timeout):
        if metrics.exists() and len(metrics.read_text().splitlines()) >= rows:
            assert not (run / "models" / f"gen-{generation + 1:04d}.pt").exists(), "training ended before the fault"
            return
        time.sleep(0.2)
    pytest.fail(f"{metrics} did not reach {rows} rows within {time.time() - start:.0f}s (load average "
                f"{os.getloadavg()[0]:.1f})" + cluster_report())


def check_training_steps(run: Path, generation: int) -> int:
    """Every planned step of the generation's training logged exactly once, and in the checkpoint."""
    paths = RunPaths(run)
    steps = plan_steps(load_config(paths.config), paths, generation)
    rows = [json.loads(x)["step"] for x in (paths.train_dir(generation + 1) / "metrics.jsonl").read_text().splitlines()]
    assert rows == list(range(1, steps + 1))
    assert read_checkpoint(paths.model(generation + 1))["steps"] == steps
    return steps


def sacct_states(job_ids: list[str]) -> dict[str, str]:
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State"], capture_output=True,
                         text=True, check=True).stdout
    return {line.split("|")[0]: line.split("|")[1].split()[0] for line in out.splitlines() if line}


@pytest.mark.slow
def test_slurm_two_nodes_two_gpus_two_generations(slurm_cluster, slurm_tmp):
    run = slurm_tmp / "sl2"
    record = launch_slurm(run, 2, "--set", "selfplay.search_workers=2", *EVAL_QUICK)  # workers spawned under srun
    st = wait_for_run(run, 540)
    for g in range(2):
        arrays = [j for j in record["jobs"] if j["generation"] == g and j["stage"] == "selfplay"]
        assert len(arrays) == 1 and arrays[0]["tasks"] == [0, 4]
        seen = set()
        for t in range(4):
            p = json.loads((run / "selfplay" / f"gen-{g:04d}" / "progress" / f"task-{t:04d}.json").read_text())
            assert p["slurm_job_id"] == arrays[0]["job_id"] and p["cuda_visible_devices"] != ""
            # the pids are the workers alive at the last one's hello: on a loaded host one worker can finish the
            # task's shards before the other has said hello (seen once under load), so 1 or 2, never more
            assert p["search_workers"] == 2 and len(p["search_worker_pids"]) in (1, 2) and p["search_worker_restarts"] == 0
            seen.add((p["node"], p["cuda_visible_devices"]))
        assert len(seen) == 4, f"tasks shared a GPU: {seen}"
        metrics = [json.loads(x) for x in (run / "train" / f"gen-{g + 1:04d}" / "metrics.jsonl").read_text().splitlines()]
        assert {m["world_size"] for m in metrics} == {4}
        assert read_checkpoint(run / "models" / f"gen-{g + 1:04d}.pt")["world_size"] == 4
        tp = json.loads((run / "train" / f"gen-{g + 1:04d}" / "progress.json").read_text())
        assert tp["nodes"] == 2 and tp["ranks"] == 4 and tp["status"] == "done"
    ids = [j["job_id"] for j in record["jobs"]]
    states = sacct_states(ids)
    assert len(states) == 2 * (4 + 1 + 1) and set(states.values()) == {"COMPLETED"}, states  # arrays, training, eval
    evals = [j for j in record["jobs"] if j["stage"] == "eval"]
    trains = [j for j in record["jobs"] if j["stage"] == "train"]
    assert [j["dependency"] for j in evals] == [f"afterok:{t['job_id']}" for t in trains]
    assert not any(e["job_id"] in j["dependency"] for e in evals for j in record["jobs"])  # nothing waits for an eval
    st = check_status_matches_disk(run, 2)
    assert all(j["state"] == "COMPLETED" for g in st["generations"] for j in g["jobs"])
    check_evaluated(run, st, 2)


@pytest.mark.slow
def test_slurm_failed_task_does_not_leave_training_pending(slurm_cluster, slurm_tmp):
    """A cancelled array task: training still starts (afterany), applies the minimum-data rule and fails
    with a clear error, and the rest of the chain is cancelled instead of pending forever."""
    run = slurm_tmp / "slfail"
    # Each task must outlast SLURM's KillWait (10 s on the testbed): scancel's SIGTERM does not stop self-play (submitit
    # lets it run), the SIGKILL after KillWait does, and a task that had finished by then is rightly counted done.
    record = launch_slurm(run, 1, "--set", "selfplay.games_per_generation=192", "--set", "selfplay.max_plies=80",
                          "--set", "train.min_selfplay_fraction=1.0")
    array = record["jobs"][0]["job_id"]
    wait_until_running(run / "selfplay" / "gen-0000" / "progress" / "task-0001.json")
    subprocess.run(["scancel", f"{array}_1"], check=True)
    st = wait_for_run(run, 300)
    gen0, gen1 = st["generations"]
    assert gen0["selfplay"]["failed"] == 1
    failed = [t for t in gen0["selfplay"]["task_rows"] if t["state"] == "failed"]
    assert failed[0]["task"] == 1 and "CANCELLED" in failed[0]["detail"]
    assert gen0["train"]["state"] == "failed" and "below the minimum" in gen0["train"]["error"]
    states = sacct_states([j["job_id"] for j in record["jobs"]])
    train0, sp1, train1 = (j["job_id"] for j in record["jobs"][1:])
    assert states[train0] == "FAILED"
    assert all(v == "CANCELLED" for k, v in states.items() if k.split("_")[0] in (sp1, train1)), states
    plain = run_cli("status", str(run))
    assert "FAILED" in plain.stdout and "below the minimum" in plain.stdout


@pytest.mark.slow
def test_local_killed_task_is_reported_and_resume_finishes_the_run(tmp_path):
    """SIGKILL of a self-play task process: the supervisor records it, status names it, the minimum-data rule
    stops training with a clear error and ``launch --wait`` exits non-zero. ``azhpc resume --wait`` then runs
    only the killed task and training: every planned game exactly once; a second resume does nothing."""
    import os
    import signal

    run = tmp_path / "kill"
    azhpc = str(Path(sys.executable).parent / "azhpc")
    proc = subprocess.Popen([azhpc, "launch", "--cluster", "local", "--generations", "1", "--run-dir", str(run), "--wait",
                             "--tasks", "2", *QUICK, "--set", "selfplay.games_per_generation=48", "--set", "selfplay.max_plies=80",
                             "--set", "train.min_selfplay_fraction=0.9", "--set", "slurm.max_attempts=2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p = wait_until_running(run / "selfplay" / "gen-0000" / "progress" / "task-0001.json")
    os.kill(p["pid"], signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, out + err
    assert len(err.strip().splitlines()) == 1 and "did not finish" in err
    st = status_json(run)
    sp, tr = st["generations"][0]["selfplay"], st["generations"][0]["train"]
    assert sp["failed"] == 1 and sp["done"] == 1
    row = [t for t in sp["task_rows"] if t["state"] == "failed"][0]
    assert row["task"] == 1 and "status -9" in row["detail"]
    assert tr["state"] == "failed" and "below the minimum" in tr["error"]
    assert st["supervisor"]["state"] == "failed"
    assert sp["games"] == disk_truth(run, 0)["games"] < 48
    # A task that keeps failing (a shard of another schema in its folder): reported with its error and attempt
    # count, and after slurm.max_attempts (2 here) failures resume refuses to run it again.
    foreign = [run / "selfplay" / "gen-0000" / "task-0001" / f"shard-00099{ext}" for ext in (".h5", ".json")]
    foreign[0].write_bytes(b"not hdf5")
    foreign[1].write_text('{"schema_version": 99}')
    res = run_cli("resume", str(run), "--wait", timeout=600)
    assert res.returncode == 1, res.stdout + res.stderr
    row = [t for t in status_json(run)["generations"][0]["selfplay"]["task_rows"] if t["state"] == "failed"]
    assert [(r["task"], r["attempt"]) for r in row] == [(1, 2)] and "schema" in row[0]["detail"], row
    res = run_cli("resume", str(run))
    assert res.returncode == 1 and "task 1 failed 2 times" in res.stderr and "--max-attempts 3" in res.stderr, res.stderr
    for f in foreign:
        f.unlink()
    jobs_before = len(json.loads((run / "launch.json").read_text())["jobs"])

    res = run_cli("resume", str(run), "--wait", "--max-attempts", "3", timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    truth = disk_truth(run, 0)
    assert (truth["games"], truth["duplicates"], truth["partial"]) == (48, 0, [])
    check_status_matches_disk(run, 1)
    record = json.loads((run / "launch.json").read_text())
    rerun = [(j["stage"], j["tasks"], j["attempt"], j["state"]) for j in record["jobs"][jobs_before:]]
    assert rerun == [("selfplay", [1, 2], 3, "done"), ("train", [0, 1], 3, "done")]
    again = run_cli("resume", str(run))
    assert again.returncode == 0 and "nothing to resume" in again.stdout, again.stdout + again.stderr
    assert len(json.loads((run / "launch.json").read_text())["jobs"]) == len(record["jobs"])


def test_cancel_at_once_after_launch_stops_the_supervisor_it_started(tmp_path):
    """launch returns before its supervisor has written itself into the record: a cancel at that moment found no
    supervisor, and the run went on. The supervisor lock names it from before it starts."""
    run = tmp_path / "run"
    res = run_cli("launch", "--cluster", "local", "--generations", "2", "--run-dir", str(run), *QUICK)
    assert res.returncode == 0, res.stderr
    holder, _ = supervisor_holder(RunPaths(run))
    res = run_cli("cancel", str(run))
    assert res.returncode == 0 and f"local-{holder}" in res.stdout + res.stderr, res.stdout + res.stderr
    assert not pid_alive(holder)
    assert supervisor_holder(RunPaths(run)) == (0, "")


def test_a_process_on_its_way_out_is_alive_until_reaped_and_a_kernel_thread_never_is(monkeypatch):
    """cancel waits while its supervisor is alive: one that had released its memory (an empty command line) but
    was not yet a zombie counted as gone, and cancel returned while the pid still existed."""
    exiting = subprocess.Popen(["sleep", "30"])  # the moment between exit_mm and zombie, which no test can hold a
    try:                                          # process in: its command line reads empty, its state R
        with monkeypatch.context() as m:
            m.setattr(procs, "cmdline", lambda pid: b"" if pid == exiting.pid else b"x")
            m.setattr(procs, "state", lambda pid: "R")
            assert azhpc_process_alive(exiting.pid, "")
    finally:
        exiting.kill()
        exiting.wait()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 30
    while procs.state(child.pid) != "Z" and time.time() < deadline:
        time.sleep(0.02)
    assert procs.cmdline(child.pid) == b"" and azhpc_process_alive(child.pid, "")  # exited, not reaped: ours yet
    child.wait()
    assert not azhpc_process_alive(child.pid, "")
    assert procs.kernel_thread(os.getpid()) is False
    kthreads = [p for p in procs.pids() if procs.kernel_thread(p)]
    if procs.parent(2) == 0:  # kthreadd is visible (not inside a PID namespace, where no kernel thread is)
        assert 2 in kthreads
    assert not any(azhpc_process_alive(p, "") for p in kthreads[:20])


@pytest.mark.slow
def test_local_launch_returns_and_cancel_stops_everything(tmp_path):
    run = tmp_path / "bg"
    res = run_cli("launch", "--cluster", "local", "--generations", "2", "--run-dir", str(run), *QUICK)
    assert res.returncode == 0 and "follow it: azhpc status" in res.stdout, res.stderr
    holder, _ = supervisor_holder(RunPaths(run))  # locked from before the supervisor's process existed
    assert holder > 0 and f"pid {holder}" in res.stdout
    progress = run / "selfplay" / "gen-0000" / "progress" / "task-0000.json"
    deadline = time.time() + 120
    while time.time() < deadline and not progress.exists():
        time.sleep(0.2)
    st = status_json(run)
    assert st["supervisor"]["state"] == "running"
    res = run_cli("cancel", str(run))
    assert res.returncode == 0, res.stderr
    record = json.loads((run / "launch.json").read_text())
    assert record["supervisor"]["state"] == "cancelled" and record["events"][-1]["event"] == "cancel"
    pids = [record["supervisor"]["pid"]] + [int(j["job_id"].split("-")[1]) for j in record["jobs"]]
    time.sleep(1)
    assert not [p for p in pids if pid_alive(p)], "a local stage process survived azhpc cancel"
    assert all(j["state"] != "running" for j in record["jobs"])
    assert not (run / "models" / "gen-0002.pt").exists()


@pytest.mark.slow
def test_slurm_cancel_leaves_nothing_queued(slurm_cluster, slurm_tmp):
    run = slurm_tmp / "slcancel"
    ids = {j["job_id"] for j in launch_slurm(run, 1)["jobs"]}
    res = slurm_cli("cancel", str(run))
    assert res.returncode == 0 and "cancelled" in res.stdout, res.stderr
    left = still_queued(ids, 60)
    assert not left, f"still queued after azhpc cancel: {left}"
    assert slurm_cli("cancel", str(run)).stdout.startswith("cancelled 0 job(s)")
    st = status_json(run)
    assert all("CANCELLED" in j["state"] or "COMPLETED" in j["state"] for g in st["generations"] for j in g["jobs"])


def test_slurm_bench_wide_watches_its_array_and_reads_every_tasks_figures(slurm_cluster, slurm_tmp):
    """azhpc bench wide on a small array: it called a status renderer that had moved, and no test ran it."""
    run = slurm_tmp / "wide"
    res = slurm_cli("bench", "wide", str(run), "--tasks", "3", "--cpus-per-task", "1", "--every", "1", timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 tasks: launch" in res.stdout and "azhpc status, refresh" in res.stdout, res.stdout
    report = json.loads(RunPaths(run).wide_report.read_text())
    assert report["tasks"] == 3 and report["failed"] == [] and report["done_s"] > 0
    assert len(report["ready_s"]) == len(report["first_game_s"]) == len(report["queue_to_process_s"]) == 3
    assert report["one_shot"] and len(report["refresh"]) == len(report["one_shot"])
    assert disk_truth(run, 0)["partial"] == [] and RunPaths(run).model(1).exists()  # it waits for the training
    assert not still_queued({j["job_id"] for j in json.loads((run / "launch.json").read_text())["jobs"]}, 60)


@pytest.mark.slow
def test_sbatch_templates_run_a_generation_on_their_own(slurm_cluster, slurm_tmp):
    """slurm/chain.sh + selfplay.sbatch + train.sbatch, no azhpc launch: one generation on 2 tasks, trained on 2 nodes."""
    import os
    import sys

    from .conftest import ROOT

    run = slurm_tmp / "tpl,1"  # a comma used to split chain.sh's --export list
    config = yaml.safe_load(TINY.read_text())
    config["train"].update(replay_ratio=12, loader_workers=0)  # long enough to be signalled mid-training
    (slurm_tmp / "tpl.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "AZHPC_PYTHON": sys.executable, "SELFPLAY_OPTS": "--cpus-per-task=1",
           "TRAIN_OPTS": "--nodes=2 --gpus-per-node=1 --cpus-per-task=1"}
    cmd, env = as_user([str(ROOT / "slurm" / "chain.sh"), str(run), str(slurm_tmp / "tpl.yaml"), "1", "2"], env, SLURM_USER)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=slurm_tmp, timeout=120)
    assert res.returncode == 0, res.stderr
    sp, tr = res.stdout.split("self-play array ")[1].split(", training ")
    tr = tr.split()[0]
    # USR2 to the training job's processes (as before its time limit): the ranks save, the job requeues itself.
    wait_for_metrics(run, 0, 3)
    subprocess.run(["scancel", "--signal=USR2", tr], check=True)
    assert not still_queued({sp, tr}, 300)
    states = sacct_states([sp, tr])
    assert states == {f"{sp}_0": "COMPLETED", f"{sp}_1": "COMPLETED", tr: "COMPLETED"}, states
    metrics = [json.loads(x) for x in (run / "train" / "gen-0001" / "metrics.jsonl").read_text().splitlines()]
    assert {m["world_size"] for m in metrics} == {2}
    check_training_steps(run, 0)
    tp = json.loads((run / "train" / "gen-0001" / "progress.json").read_text())
    assert (tp["attempt"], tp["restart_count"], tp["status"]) == (2, 1, "done"), tp
    check_status_matches_disk(run, 1)


def progress_of(run: Path, generation: int, task: int) -> dict:
    path = run / "selfplay" / f"gen-{generation:04d}" / "progress" / f"task-{task:04d}.json"
    return json.loads(path.read_text()) if path.exists() else {}


@pytest.fixture
def start_replay(tmp_path):
    """start_replay(run, generation, task, tasks): that task played again, uninterrupted, in a copy of the run (same
    config, same network), in the background: it needs only what launch wrote, so it runs beside the SLURM run
    instead of after it. Killed at the end of the test if still running."""
    import shutil
    import sys

    procs = []

    def start(run: Path, generation: int, task: int, tasks: int) -> tuple[subprocess.Popen, Path]:
        ref = tmp_path / f"ref-{run.name}"
        (ref / "models").mkdir(parents=True)
        shutil.copy(run / "config.yaml", ref / "config.yaml")
        shutil.copy(run / "models" / f"gen-{generation:04d}.pt", ref / "models" / f"gen-{generation:04d}.pt")
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        with open(ref / "replay.log", "wb") as log:  # a file, not a pipe that nobody reads while it plays
            procs.append(subprocess.Popen([sys.executable, "-m", "alphazero_hpc.launch.stages", "selfplay", str(ref),
                                           str(generation), str(task), str(tasks)],
                                          stdout=log, stderr=subprocess.STDOUT, env=env))
        return procs[-1], ref

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def replayed_positions(replay: tuple[subprocess.Popen, Path], generation: int, task: int) -> int:
    proc, ref = replay
    assert proc.wait(timeout=600) == 0, (ref / "replay.log").read_text(errors="replace")[-2000:]
    return progress_of(ref, generation, task)["positions"]


@pytest.mark.slow
def test_slurm_requeue_of_a_writing_task_and_of_training_loses_and_repeats_nothing(slurm_cluster, slurm_tmp, start_replay):
    """``scontrol requeue`` of one array task while it writes shards, then of the training job while it trains:
    the run ends with every game exactly once, the task's positions equal an uninterrupted replay of it, and
    training logs every planned step exactly once."""
    run = slurm_tmp / "slrq"
    # SIGTERM leaves self-play running until SLURM's SIGKILL (srun waited 12 s on the testbed): the task must have far
    # more than that left after its first shard, or it finishes in the first attempt. At tiny's 16 simulations the
    # remaining 124 games took 11-15 s on a quiet host and the test failed there (2026-11-25); at 64 they take ~4x as
    # long, so the kill lands mid-work on a host three times faster too
    record = launch_slurm(run, 1, "--set", "selfplay.games_per_generation=256", "--set", "train.replay_ratio=3",
                          "--set", "mcts.simulations=64", "--set", "mcts.fast_simulations=16", generations=1)
    array, train = record["jobs"][0]["job_id"], record["jobs"][1]["job_id"]
    replay = start_replay(run, 0, 0, 2)  # beside the run: it also slows the tasks, so the requeue lands mid-work
    deadline = time.time() + 240
    while not list((run / "selfplay" / "gen-0000" / "task-0000").glob("shard-*.json")) and time.time() < deadline:
        time.sleep(0.1)
    assert progress_of(run, 0, 0)["status"] == "running", "the task must still be writing"
    subprocess.run(["scontrol", "requeue", f"{array}_0"], check=True)
    # 600 s: the requeued task plays its games again beside the replay; on a 2-core AMD Zen 3 beside a training run
    # its training had not logged 3 steps after 300 s (2026-12-02); the test alone took 309 s there
    wait_for_metrics(run, 0, 3, timeout=600)
    subprocess.run(["scontrol", "requeue", train], check=True)
    wait_for_run(run, 480)

    assert sacct_states([array, train]) == {f"{array}_0": "COMPLETED", f"{array}_1": "COMPLETED", train: "COMPLETED"}
    assert progress_of(run, 0, 0)["attempt"] == 2 and progress_of(run, 0, 1)["attempt"] == 1
    tp = json.loads((run / "train" / "gen-0001" / "progress.json").read_text())
    assert (tp["attempt"], tp["restart_count"], tp["status"]) == (2, 1, "done"), tp
    truth = disk_truth(run, 0)
    assert (truth["games"], truth["duplicates"], truth["partial"]) == (256, 0, [])
    assert progress_of(run, 0, 0)["positions"] == replayed_positions(replay, 0, 0)
    check_training_steps(run, 0)
    check_status_matches_disk(run, 1)


@pytest.mark.slow
def test_slurm_time_limit_stops_in_time_requeues_and_completes(slurm_cluster, slurm_tmp):
    """One-minute time limits, slurm.stop_margin_s=40: self-play stops starting shards and training saves its
    state before the limit, each requeues its own job, and the run completes with every game exactly once.
    Once a stage has stopped at its margin and been requeued, the test raises that job's time limit (as an operator
    can, ``scontrol update``): the next slice reads its new limit and finishes the stage. With one-minute slices
    throughout, a loaded host spent 14-19 s of each 20 s window starting up (two other processes on 2 cores,
    2026-12-03): 10 self-play and 12+ training slices, and in CI (2026-12-03, 42 min suite) three slices in a row
    without a step failed the training job (slurm.max_attempts); tests/test_slices_long.py covers many slices."""
    run = slurm_tmp / "sltime"
    # The margin leaves a 20 s window of a one-minute slice: a task's games (360 each) take longer than that even on a
    # quiet host (144 games took under 20 s there), as do the ~1000 steps. USR2 1 s before the end: SLURM may send it up
    # to 60 s early (sbatch(1)), and with the default lead (20 s) it came ~20 s into a one-minute slice, before the
    # stop it backs up; with 1 s the margin's stop came first in the runs seen
    record = launch_slurm(run, 1, "--selfplay-time", "1", "--train-time", "1", "--set", "slurm.stop_margin_s=40",
                          "--set", "slurm.signal_lead_s=1", "--set", "selfplay.games_per_generation=720",
                          "--set", "train.replay_ratio=3", generations=1)
    array, train = record["jobs"][0]["job_id"], record["jobs"][1]["job_id"]
    train_progress = run / "train" / "gen-0001" / "progress.json"

    def attempts() -> tuple[int, int]:
        tp = json.loads(train_progress.read_text()) if train_progress.exists() else {}
        return max(progress_of(run, 0, t).get("attempt", 0) for t in range(2)), tp.get("attempt", 0)

    for stage, job in ((0, array), (1, train)):
        deadline = time.time() + 600
        # an array's sacct rows are its elements (ID_0, ID_1), never the bare ID: done when every row is COMPLETED
        while attempts()[stage] < 2 and time.time() < deadline and set(sacct_states([job]).values()) != {"COMPLETED"}:
            time.sleep(1)
        assert attempts()[stage] >= 2, (f"the {('self-play', 'training')[stage]} stage did not start a second slice "
                                        f"within 600 s: {attempts()}" + cluster_report())
        res = subprocess.run(["scontrol", "update", f"JobId={job}", "TimeLimit=10"], capture_output=True, text=True)
        # an array element that already finished is not updated ("394_0: Job has already finished", exit 1); the rest are
        said = (res.stdout + res.stderr).splitlines()
        errors = [x for x in said if x.strip() and not x.endswith(("No error", "already finished"))]
        assert not errors and (res.returncode == 0 or any(x.endswith("already finished") for x in said)), res
    wait_for_run(run, 480)
    assert sacct_states([array, train]) == {f"{array}_0": "COMPLETED", f"{array}_1": "COMPLETED", train: "COMPLETED"}
    slices = json.loads((run / "train" / "gen-0001" / "slices.json").read_text())["slices"]
    # the margin's stop, not USR2, ended a slice (rank 0 records "another rank stopped" when the other rank's margin
    # came first; a start later than the margin is a stop in time as well)
    assert any(not s["ended"].startswith("stopped: signal") for s in slices[:-1]) and slices[-1]["ended"] == "done", slices
    truth = disk_truth(run, 0)
    assert (truth["games"], truth["duplicates"], truth["partial"]) == (720, 0, [])
    check_training_steps(run, 0)
    check_status_matches_disk(run, 1)


@pytest.mark.slow
def test_slurm_killed_task_then_resume_twice(slurm_cluster, slurm_tmp):
    """SIGKILL of a self-play task's process (not through SLURM): the element fails, training refuses too little
    data and the chain is cancelled; ``azhpc resume`` submits exactly that task, its training and generation 1;
    a second resume right after submits nothing; the run completes with every game exactly once."""
    import os
    import signal

    run = slurm_tmp / "slkill"
    record = launch_slurm(run, 1, "--set", "selfplay.games_per_generation=32", "--set", "train.min_selfplay_fraction=1.0")
    p = wait_until_running(run / "selfplay" / "gen-0000" / "progress" / "task-0001.json")
    os.kill(p["pid"], signal.SIGKILL)
    st = wait_for_run(run, 300)
    row = [t for t in st["generations"][0]["selfplay"]["task_rows"] if t["state"] == "failed"]
    assert [r["task"] for r in row] == [1] and "FAILED" in row[0]["detail"], row
    assert st["generations"][0]["train"]["state"] == "failed"

    res = slurm_cli("resume", str(run))
    assert res.returncode == 0, res.stdout + res.stderr
    new = json.loads((run / "launch.json").read_text())["jobs"][len(record["jobs"]):]
    assert [(j["generation"], j["stage"], j["task_ids"] if "task_ids" in j else j["tasks"]) for j in new] == [
        (0, "selfplay", [1, 2]), (0, "train", [0, 1]), (1, "selfplay", [0, 2]), (1, "train", [0, 1])], new
    again = slurm_cli("resume", str(run))
    assert again.returncode == 0 and "nothing to resume" in again.stdout, again.stdout + again.stderr
    assert len(json.loads((run / "launch.json").read_text())["jobs"]) == len(record["jobs"]) + 4
    wait_for_run(run, 540)
    for g in range(2):
        truth = disk_truth(run, g)
        assert (truth["games"], truth["duplicates"], truth["partial"]) == (32, 0, []), (g, truth)
    assert progress_of(run, 0, 1)["attempt"] == 2
    check_status_matches_disk(run, 2)


@pytest.mark.parametrize("slurm_state", ["OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED", "REVOKED", "NODE_FAIL", "FAILED"])
def test_status_believes_slurm_over_a_progress_file_left_running(tmp_path, slurm_state):
    """A training job killed hard (OOM, a lost node) leaves its progress file saying "running": SLURM's state wins."""
    from alphazero_hpc.cluster.scheduler import JobState
    from alphazero_hpc.launch.plan import LaunchPlan
    from alphazero_hpc.launch.record import JobRecord, LaunchRecord
    from alphazero_hpc.report.status import _generation, _job_row
    from alphazero_hpc.store import atomic
    from alphazero_hpc.store.progress import TrainProgress
    from alphazero_hpc.store.runconfig import resolve_run_config

    paths = RunPaths(tmp_path)
    cfg = resolve_run_config(paths, TINY, [])
    plan = LaunchPlan("slurm", 1, 1, 1, 1, 1)
    record = LaunchRecord(plan=plan, jobs=[JobRecord(0, "selfplay", "76", [0, 1]), JobRecord(0, "train", "77", [0, 1])])
    atomic.write_json(paths.train_progress(1), TrainProgress(1, 0, status="running").to_json())
    states = {"76": JobState("COMPLETED", "exit 0:0", "sacct"), "77": JobState(slurm_state, "exit 0:9", "sacct")}
    gen = _generation(paths, cfg, plan, [_job_row(j, plan, states) for j in record.jobs], states, record, 0, ({}, ""), set())
    assert gen.train.state == "failed" and slurm_state in gen.train.error


def test_two_launches_into_one_new_folder_one_wins_and_the_loser_deletes_nothing(tmp_path):
    """Both start before the folder exists (the old code let the loser rmtree the winner's files)."""
    import threading

    from alphazero_hpc.launch.start import launch
    from alphazero_hpc.store.runconfig import read_run_config

    run = tmp_path / "run"
    won, lost = [], []
    barrier = threading.Barrier(2)

    def go(seed: int) -> None:
        barrier.wait()
        try:
            won.append((seed, launch(run, TINY, [f"run.seed={seed}"], cluster="local", detach=False)))
        except AzhpcError as exc:
            lost.append(str(exc))

    threads = [threading.Thread(target=go, args=(seed,)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(won) == 1 and len(lost) == 1, (won, lost)
    assert "in use by azhpc launch" in lost[0] or "already launched" in lost[0]
    paths = RunPaths(run)
    assert read_run_config(paths).run.seed == won[0][0]
    assert paths.launch_record.exists() and paths.model(0).exists()


def test_a_launch_refused_by_the_lock_names_the_holder_and_keeps_the_folder(tmp_path):
    from alphazero_hpc.launch.record import record_lock
    from alphazero_hpc.launch.start import launch

    paths = RunPaths(tmp_path / "run")
    paths.root.mkdir()
    (paths.root / "keep.txt").write_text("x")
    with record_lock(paths, "azhpc resume (test)"):
        with pytest.raises(AzhpcError, match=r"in use by azhpc resume \(test\) \(pid \d+ on "):
            launch(paths.root, TINY, ["run.seed=3"], cluster="local", detach=False)
    assert (paths.root / "keep.txt").read_text() == "x" and not paths.config.exists()
    # a launch that fails on its own plan keeps a folder it did not make
    with pytest.raises(AzhpcError, match="needs a cluster"):
        launch(paths.root, TINY, ["slurm.nodes=2"], cluster="local", detach=False)
    assert (paths.root / "keep.txt").exists()


def test_default_run_folders_are_unique_within_a_second(tmp_path):
    from alphazero_hpc.launch.start import new_run_dir

    made = {new_run_dir(tmp_path) for _ in range(5)}
    assert len(made) == 5 and all(p.is_dir() for p in made)


def test_a_silent_scheduler_is_not_a_finished_run(tmp_path, monkeypatch):
    """squeue and sacct fail: status warns and is not over (wait and watch go on); cancel fails and records nothing."""
    from alphazero_hpc.launch.plan import LaunchPlan
    from alphazero_hpc.launch.record import JobRecord, LaunchRecord, read_record, write_record
    from alphazero_hpc.report.render import render, render_brief
    from alphazero_hpc.report.status import collect, finished
    from alphazero_hpc.store.runconfig import resolve_run_config

    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("squeue", "sacct", "scancel", "sinfo", "sbatch"):
        (fake / name).write_text("#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller' >&2\nexit 1\n")
        (fake / name).chmod(0o755)
    paths = RunPaths(tmp_path / "run")
    resolve_run_config(paths, TINY, [])
    write_record(paths, LaunchRecord(plan=LaunchPlan("slurm", 1, 2, 1, 1, 2),
                                     jobs=[JobRecord(0, "selfplay", "41", [0, 2]), JobRecord(0, "train", "42", [0, 1])]))
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    st = collect(paths.root)
    assert finished(st) == (False, False)  # the old code read every job as gone: (True, False) at once
    assert "squeue did not answer" in render(st) and "WARNING" in render_brief(st)
    assert "squeue did not answer" in st.to_json()["scheduler_error"]
    r = run_cli("cancel", str(paths.root), env={"PATH": f"{fake}:{os.environ['PATH']}"})
    assert r.returncode == 1 and "squeue did not answer" in r.stderr  # was: "cancelled 0 job(s)", exit 0
    record = read_record(paths)
    assert record is not None and not record.events  # no cancel recorded


def test_a_run_is_not_over_while_the_job_that_wrote_its_last_network_exits(tmp_path, monkeypatch):
    """The last network written while its training job is still RUNNING (rank 0 writes it, then the job exits): the
    run is not over yet, so ``--wait`` does not end on a table showing that job RUNNING beside a finished run; once
    the job has left the queue it is over and succeeded, and so it is with the job pending, held, or still running
    long after the network (nothing to wait for there)."""
    from alphazero_hpc.launch.plan import LaunchPlan
    from alphazero_hpc.launch.record import JobRecord, LaunchRecord, write_record
    from alphazero_hpc.net.checkpoint import ensure_initial_checkpoint
    from alphazero_hpc.report.status import EXIT_GRACE_S, collect, finished
    from alphazero_hpc.store.runconfig import resolve_run_config

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sacct").write_text("#!/bin/sh\nexit 1\n")  # no accounting: squeue alone says what runs
    (fake / "squeue").write_text(f"#!/bin/sh\ncat {tmp_path / 'queue'}\n")
    for name in ("sacct", "squeue"):
        (fake / name).chmod(0o755)
    paths = RunPaths(tmp_path / "run")
    cfg = resolve_run_config(paths, TINY, [])
    write_record(paths, LaunchRecord(plan=LaunchPlan("slurm", 1, 2, 1, 1, 2),
                                     jobs=[JobRecord(0, "selfplay", "41", [0, 2]), JobRecord(0, "train", "42", [0, 1])]))
    ensure_initial_checkpoint(paths.model(1), cfg.model, 0)  # the last network is on disk
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    queue = tmp_path / "queue"
    queue.write_text("42|RUNNING|None\n")
    st = collect(paths.root)
    assert st.generations[-1].train.checkpoint and finished(st) == (False, True)
    queue.write_text("")
    assert finished(collect(paths.root)) == (True, True)
    # a job pending or held after the network changes nothing (its stage finds the network): no reason to wait
    for line in ("42|PENDING|DependencyNeverSatisfied\n", "42|REQUEUE_HOLD|JobHeldAdmin\n"):
        queue.write_text(line)
        assert finished(collect(paths.root)) == (True, True), line
    # nor is one still running long after its network (a rank hung in its teardown): shown as it is, not waited for
    queue.write_text("42|RUNNING|None\n")
    old = time.time() - EXIT_GRACE_S - 5
    os.utime(paths.model(1), (old, old))
    st = collect(paths.root)
    assert finished(st) == (True, True) and st.generations[-1].jobs[-1].state == "RUNNING"


def test_dry_run_quotes_paths_as_submitted_and_refuses_control_characters(tmp_path):
    run = tmp_path / "a b'c"
    res = run_cli("launch", "--cluster", "slurm", "--dry-run", "--config", str(TINY), "--generations", "1", "--run-dir", str(run))
    assert res.returncode == 0, res.stderr
    quoted = "'" + str(run).replace("'", "'\"'\"'") + "/logs/%j'"  # shlex.quote, as submitit writes the script
    assert quoted in res.stdout
    assert not run.exists()  # a dry run writes nothing
    bad = str(tmp_path / "x\nsbatch evil")
    for args in (["launch", "--cluster", "slurm", "--dry-run"], ["launch", "--cluster", "local"]):
        res = run_cli(*args, "--config", str(TINY), "--run-dir", bad)
        assert res.returncode == 1 and "control character" in res.stderr
    assert not list(tmp_path.glob("x*"))


def _local_record(paths, supervisor: SupervisorRecord, jobs=()):
    from alphazero_hpc.launch.plan import LaunchPlan
    from alphazero_hpc.launch.record import LaunchRecord, write_record
    from alphazero_hpc.store.runconfig import resolve_run_config

    resolve_run_config(paths, TINY, [])
    write_record(paths, LaunchRecord(plan=LaunchPlan("local", 1, 1, 1, 0, 1), supervisor=supervisor, jobs=list(jobs)))


def test_local_cancel_and_resume_from_another_machine_touch_nothing(tmp_path):
    """The recorded pid is another host's: an unrelated process here with that pid must survive."""
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        paths = RunPaths(tmp_path / "run")
        _local_record(paths, {"pid": bystander.pid, "host": "some-other-node", "state": "running"})
        r = run_cli("cancel", str(paths.root))
        assert r.returncode == 1 and "started on some-other-node" in r.stderr
        r = run_cli("resume", str(paths.root))
        assert r.returncode == 1 and "started on some-other-node" in r.stderr
        assert bystander.poll() is None  # the old cancel SIGTERMed it
    finally:
        bystander.kill()


def test_a_reused_pid_is_not_the_supervisor(tmp_path):
    import socket

    bystander = subprocess.Popen(["sleep", "60"])  # not an azhpc process, though it has the recorded pid
    try:
        paths = RunPaths(tmp_path / "run")
        _local_record(paths, {"pid": bystander.pid, "host": socket.gethostname(), "state": "running"})
        r = run_cli("cancel", str(paths.root))
        assert r.returncode == 0, r.stderr
        assert bystander.poll() is None
    finally:
        bystander.kill()


def test_resume_stops_the_stage_processes_a_killed_supervisor_left(tmp_path):
    import socket

    from alphazero_hpc.launch.record import JobRecord, read_record
    from alphazero_hpc.launch.resume import resume

    # a stand-in for a self-play stage whose supervisor was SIGKILLed: alive, and an azhpc process by its command line
    orphan = _detached("import time; time.sleep(120)", "alphazero_hpc.launch.stages", "selfplay")
    try:
        paths = RunPaths(tmp_path / "run")
        gone = subprocess.Popen(["true"])
        gone.wait()
        host = socket.gethostname()
        _local_record(paths, {"pid": gone.pid, "host": host, "state": "running"},
                      [JobRecord(0, "selfplay", f"local-{orphan}", [0, 1], state="running", host=host)])
        result = resume(paths.root, detach=False)
        assert result.cancelled == [f"local-{orphan}"] and result.run_here
        assert not pid_alive(orphan)  # stopped: no second copy of the task beside the new one
        record = read_record(paths)
        assert record is not None and record.jobs[0].state == "stopped"
    finally:
        if pid_alive(orphan):
            os.kill(orphan, 9)


def test_resume_stops_a_stage_the_killed_supervisor_had_not_recorded(tmp_path):
    """A supervisor SIGKILLed between starting a stage and writing its pid into the record (CI once saw the chaos
    test's corrupted shard rewritten by such a second copy of its task): resume finds the stage by its command line
    (its run folder, given relative to its own working directory) and stops it; another run's stage runs on."""
    import socket

    from alphazero_hpc.launch.resume import resume

    sleeper = "import time; time.sleep(120)"
    (tmp_path / "other").mkdir()
    unrecorded = _detached(sleeper, "alphazero_hpc.launch.stages", "selfplay", "run", "0", "0", "2", cwd=tmp_path)
    bystander = _detached(sleeper, "alphazero_hpc.launch.stages", "selfplay", str(tmp_path / "other"))
    try:
        paths = RunPaths(tmp_path / "run")
        gone = subprocess.Popen(["true"])
        gone.wait()
        _local_record(paths, {"pid": gone.pid, "host": socket.gethostname(), "state": "running"})
        t0 = time.time()
        result = resume(paths.root, detach=False)
        assert result.cancelled == [f"local-{unrecorded}"] and result.run_here
        assert not pid_alive(unrecorded) and time.time() - t0 < 20  # stopped by SIGTERM: no second copy of the task
        assert pid_alive(bystander)
    finally:
        for pid in (unrecorded, bystander):
            if pid_alive(pid):
                os.kill(pid, 9)


def _detached(*code: str, cwd=None, script=None) -> int:
    """A python process (``-c`` code and its arguments, or ``script`` and its arguments) that init reaps (as the
    detached supervisor is); returns its pid."""
    import sys

    args = [str(script), *code] if script else ["-c", *code]
    out = subprocess.run(["sh", "-c", '"$@" >/dev/null 2>&1 & echo $!', "sh", sys.executable, *args],
                         capture_output=True, text=True, check=True, cwd=cwd)
    return int(out.stdout)


def test_cancel_kills_a_supervisor_that_ignores_sigterm_and_its_stages(tmp_path):
    """A hung supervisor (CI once saw one outlive azhpc cancel): cancel waits its timeout, SIGKILLs it, stops
    its stage processes as orphans, and returns only when none of them is left."""
    import socket

    from alphazero_hpc.launch.cancel import cancel_run
    from alphazero_hpc.launch.record import JobRecord, read_record

    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    supervisor = _detached(stubborn, "alphazero_hpc.launch.local")
    stage = _detached(stubborn, "alphazero_hpc.launch.stages", "selfplay")
    try:
        time.sleep(0.5)  # both have installed SIG_IGN
        paths = RunPaths(tmp_path / "run")
        host = socket.gethostname()
        _local_record(paths, {"pid": supervisor, "host": host, "state": "running"},
                      [JobRecord(0, "selfplay", f"local-{stage}", [0, 1], state="running", host=host)])
        t0 = time.time()
        live = cancel_run(paths.root, timeout_s=1.0)
        assert time.time() - t0 < 15
        assert live == [f"local-{supervisor}", f"local-{stage}"]
        assert not pid_alive(supervisor) and not pid_alive(stage)
        record = read_record(paths)
        assert record is not None and record.supervisor["state"] == "cancelled" and record.jobs[0].state == "stopped"
    finally:
        for pid in (supervisor, stage):
            if pid_alive(pid):
                os.kill(pid, 9)


def test_a_supervisor_not_yet_in_the_record_is_neither_resumed_beside_nor_left_by_cancel(tmp_path):
    """launch starts the supervisor and returns; until the supervisor writes itself into the record, the record says
    nothing (the chaos driver once resumed such a run, and two supervisors played the same tasks). The supervisor's
    flock says it: a second supervisor is refused and touches nothing, resume leaves the run alone, and cancel finds
    the supervisor by the lock and stops it."""
    import socket
    import sys

    from alphazero_hpc.launch.cancel import cancel_run
    from alphazero_hpc.launch.record import read_record
    from alphazero_hpc.launch.resume import resume

    paths = RunPaths(tmp_path / "run")
    _local_record(paths, {})
    # a stand-in for a foreground supervisor: the azhpc console script (no "alphazero_hpc" in its command line)
    script = tmp_path / "bin" / "azhpc"
    script.parent.mkdir()
    script.write_text("import fcntl, os, socket, sys, time\n"
                      "f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX)\n"
                      "f.write(f'{os.getpid()} {socket.gethostname()}\\n'); f.flush(); time.sleep(120)\n")
    holder = _detached(str(paths.supervisor_lock), script=script)
    try:
        deadline = time.time() + 30
        while not paths.supervisor_lock.exists() or not paths.supervisor_lock.read_text().strip():
            assert time.time() < deadline
            time.sleep(0.05)
        before = paths.launch_record.read_text()
        second = subprocess.run([sys.executable, "-m", "alphazero_hpc.launch.local", str(paths.root)],
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 1
        assert second.stderr.strip() == (f"azhpc: {paths.root} is already run by a local supervisor (pid {holder} on "
                                         f"{socket.gethostname()}): azhpc status {paths.root} follows it, azhpc cancel stops it")
        assert paths.launch_record.read_text() == before  # the refused one wrote nothing

        result = resume(paths.root, detach=True)
        assert not result.supervisor_pid and not result.cancelled and f"pid {holder} " in result.message
        assert pid_alive(holder)
        record = read_record(paths)
        assert record is not None and record.supervisor == {}

        assert cancel_run(paths.root, timeout_s=10) == [f"local-{holder}"]
        assert not pid_alive(holder)
    finally:
        if pid_alive(holder):
            os.kill(holder, 9)


def test_status_refresh_reads_only_what_changed(tmp_path, monkeypatch):
    """A watching status re-reads no unchanged sidecar, only the tail of metrics.jsonl, and nothing of a settled
    generation."""
    from alphazero_hpc.report import status as status_mod
    from alphazero_hpc.search.fakes import UniformEvaluator
    from alphazero_hpc.selfplay.task import run_selfplay_task
    from alphazero_hpc.store import shards as shards_mod

    paths = RunPaths(tmp_path)
    run_selfplay_task(tmp_path, 0, 0, 1, TINY, ["selfplay.games_per_generation=4", "selfplay.games_per_shard=1",
                                                "selfplay.max_plies=20"], evaluator=UniformEvaluator(2))
    reads = []
    real = shards_mod.read_sidecar

    def counted_read_sidecar(p):
        reads.append(p)
        return real(p)
    monkeypatch.setattr(shards_mod, "read_sidecar", counted_read_sidecar)
    monkeypatch.setattr(status_mod, "_SIDECARS", shards_mod.SidecarCache())
    first = status_mod.collect(tmp_path)
    assert len(reads) == 4 and first.generations[0].selfplay.shards == 4
    status_mod.collect(tmp_path)
    assert len(reads) == 4  # nothing new: nothing read
    # metrics.jsonl: a megabyte of old lines (not even valid text) before the last row; only the tail is read
    metrics = paths.train_metrics(1)
    metrics.parent.mkdir(parents=True)
    metrics.write_bytes(b"\xff" * 1_000_000 + b'\n{"step": 7, "steps": 9, "policy_loss": 1.5, "value_loss": 0.5}\n')
    st = status_mod.collect(tmp_path)
    assert st.generations[0].train.step == 7 and st.generations[0].train.policy_loss == 1.5
    # a settled generation (its network written, every task done) is read once, then not at all
    import dataclasses
    import shutil

    from alphazero_hpc.store import progress as progress_mod

    progress_reads = []
    real_progress = progress_mod.read_task_progress

    def counted_read_task_progress(p):
        progress_reads.append(p)
        return real_progress(p)
    monkeypatch.setattr(status_mod, "read_task_progress", counted_read_task_progress)
    monkeypatch.setattr(status_mod, "_SETTLED", {})
    from alphazero_hpc.launch.record import JobRecord, LaunchRecord, write_record

    cfg = load_config(paths.config)
    plan = dataclasses.replace(make_plan(cfg, "local"), generations=1)
    write_record(paths, LaunchRecord(plan, "test", jobs=[JobRecord(0, "selfplay", "local-1", [0, 1], state="done")]))
    shutil.copyfile(paths.sidecar(0, 0, 0), paths.root / "unused")  # any file: the network only has to exist
    paths.model(1).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(paths.root / "unused", paths.model(1))
    assert status_mod.collect(tmp_path).generations[0].train.state == "done" and len(progress_reads) == 1
    again = status_mod.collect(tmp_path)
    assert len(progress_reads) == 1 and again.generations[0].selfplay.shards == 4
    paths.progress(0, 0).unlink()  # not read again: a settled generation does not change
    assert status_mod.collect(tmp_path).generations[0].selfplay.done == 1 and len(progress_reads) == 1


def test_slurm_jobs_are_requeued_past_submitits_three_time_limits(tmp_path):
    """submitit gives up on a job after max_num_timeout (default 3) USR2 stops; a training job that needed five
    one-minute slices failed so. The chain's executors take slurm.max_slices instead."""
    from alphazero_hpc.launch.slurm import SlurmChain

    cfg = load_config(TINY, ["slurm.max_slices=7"])
    chain = SlurmChain(RunPaths(tmp_path / "run"), cfg, make_plan(cfg, "slurm"), dry_run=True)
    assert chain._executor().max_num_timeout == 7
    assert load_config(TINY).slurm.max_slices >= 50  # the default: many slices, not submitit's 3
    with pytest.raises(AzhpcError, match="slurm.max_slices"):
        load_config(TINY, ["slurm.max_slices=0"])


@pytest.fixture
def submit_limit(slurm_cluster):
    """A real MaxSubmitJobs on the submitting user's association (the testbed enforces limits), removed afterwards.
    The controller's count of the user's submitted jobs starts from the queue: Slurm 22.05 leaks that count when jobs
    are requeued (the tests before this one requeue many; it read 1 with the queue empty, and sbatch refused a
    generation that fitted), and ``scontrol reconfigure`` counts again."""
    subprocess.run(["scontrol", "reconfigure"], check=True, capture_output=True)
    deadline = time.time() + 30
    while time.time() < deadline and submit_count() != 0:
        time.sleep(1)
    assert submit_count() == 0, "the controller still counts jobs of the submitting user after scontrol reconfigure"

    def set_limit(value: int) -> None:
        subprocess.run(["sacctmgr", "-i", "modify", "user", SLURM_USER, "set", f"MaxSubmitJobs={value}"],
                       check=True, capture_output=True)
    yield set_limit
    set_limit(-1)


def submit_count() -> int | None:
    """The controller's count of the submitting user's submitted jobs (what the product reads)."""
    from alphazero_hpc.cluster.limits import controller_records

    return controller_records(SLURM_USER)


def test_slurm_the_controllers_count_of_submitted_records_is_read_for_each_array_element(slurm_cluster, tmp_path):
    """A held array of 3 counts 3 records for the controller and for squeue, and the window planner takes the
    higher of the two (sbatch checks the controller's, which Slurm 22.05 was seen to leak after requeues)."""
    from alphazero_hpc.cluster.limits import queued_records

    assert submit_count() == 0 and not user_jobs(), "the testbed must be idle"
    cmd, env = as_user(["sbatch", "--hold", "--array=0-2", "-o", "/dev/null", "--wrap", "true"], dict(os.environ), SLURM_USER)
    job = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()[-1]
    try:
        assert len(user_jobs()) == 3
        assert submit_count() == 3
        assert queued_records(user=SLURM_USER) == 3
    finally:
        subprocess.run(["scancel", job], check=True)
    deadline = time.time() + 30
    while time.time() < deadline and (submit_count() or user_jobs()):
        time.sleep(1)
    assert submit_count() == 0


def default_account() -> str:
    """The submitting user's default account in the testbed."""
    account = subprocess.run(["sacctmgr", "-nP", "show", "user", SLURM_USER, "format=DefaultAccount"],
                             capture_output=True, text=True).stdout.strip()
    assert account, f"the submitting user {SLURM_USER} has no default account in the testbed"
    return account


def sacctmgr(*args: str) -> None:
    subprocess.run(["sacctmgr", "-i", *args], check=True, capture_output=True, text=True)


def held_sbatch(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """A held job (``true``) of the submitting user."""
    cmd, env = as_user(["sbatch", "--hold", *args, "-o", "/dev/null", "--wrap", "true"], dict(os.environ), SLURM_USER)
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)


@contextlib.contextmanager
def held_jobs_in_a_new_account(cwd: Path, name: str, parent: str = ""):
    """A new account ``name`` (under ``parent``) with an association of the submitting user and a held array of 3
    of that user's in it; yields the list of job ids to cancel, and afterwards cancels them and removes the account."""
    sacctmgr("add", "account", name, *([f"parent={parent}"] if parent else []))
    sacctmgr("add", "user", SLURM_USER, f"account={name}")
    jobs: list[str] = []
    try:
        deadline = time.time() + 30  # the controller learns the new association from slurmdbd
        while (res := held_sbatch(cwd, f"--account={name}", "--array=0-2")).returncode != 0 and time.time() < deadline:
            time.sleep(1)
        assert res.returncode == 0, res.stderr
        jobs.append(res.stdout.split()[-1])
        yield jobs
    finally:
        subprocess.run(["scancel", *jobs], check=False)
        deadline = time.time() + 30
        while time.time() < deadline and user_jobs():
            time.sleep(1)
        sacctmgr("delete", "user", "where", f"name={SLURM_USER}", f"account={name}")
        sacctmgr("delete", "account", name)


def test_slurm_jobs_under_another_account_leave_an_associations_room_alone(slurm_cluster, submit_limit, tmp_path):
    """MaxSubmitJobs=3 on the submitting user's association in its default account, and three held jobs of the same
    user under a second account: Slurm still takes three more under the default account and refuses a fourth, and
    the room the product reads follows it (3, then 0), where counting every record of the user would read 0 at once."""
    from alphazero_hpc.cluster import limits

    account = default_account()
    sacctmgr("modify", "user", "where", f"name={SLURM_USER}", f"account={account}", "set", "MaxSubmitJobs=3")
    with held_jobs_in_a_new_account(tmp_path, "azhpcside") as jobs:
        found = limits.read_submit_limits(user=SLURM_USER)
        assert [f.source for f in found if f.account] == [f"MaxSubmitJobs=3 of user {SLURM_USER}'s association in account {account} (sacctmgr)"]
        assert limits.queued_records(user=SLURM_USER) == 3  # every record of the user: the old, over-counted reading
        room = limits.room(found)
        assert room is not None and room[:1] == (3,)
        res = held_sbatch(tmp_path, "--array=0-2")
        assert res.returncode == 0, res.stderr  # Slurm agrees: the side account's jobs do not count here
        jobs.append(res.stdout.split()[-1])
        room = limits.room(found)
        assert room is not None and room[0] == 0
        res = held_sbatch(tmp_path)
        assert res.returncode != 0 and limits.is_submit_limit(res.stderr), res.stderr


def test_slurm_a_sub_accounts_jobs_count_against_its_parents_group_cap(slurm_cluster, submit_limit, tmp_path):
    """GrpSubmitJobs=4 on the submitting user's default account and three held jobs of the same user under a
    sub-account of it: Slurm takes one more job under the parent and refuses the next, and the room the product reads
    follows it (1, then 0) where squeue's listing of the parent account (no records) alone would read 4."""
    from alphazero_hpc.cluster import limits

    account = default_account()
    sacctmgr("modify", "account", "where", f"name={account}", "set", "GrpSubmitJobs=4")
    try:
        with held_jobs_in_a_new_account(tmp_path, "azhpcsub", parent=account) as jobs:
            found = limits.read_submit_limits(user=SLURM_USER)
            group = [f for f in found if f.account and not f.user]
            assert [f.source for f in group] == [f"GrpSubmitJobs=4 of account {account} (sacctmgr)"], found
            listed = subprocess.run(["squeue", "-h", "-r", "-a", *group[0].squeue_scope(), "-o", "%i"],
                                    capture_output=True, text=True).stdout.split()
            assert listed == []  # what squeue lists in the account's scope: the sub-account's jobs are not there
            room = limits.room(found)
            assert room is not None and room[:2] == (1, group[0])
            res = held_sbatch(tmp_path)
            assert res.returncode == 0, res.stderr
            jobs.append(res.stdout.split()[-1])
            room = limits.room(found)
            assert room is not None and room[:2] == (0, group[0])
            res = held_sbatch(tmp_path)
            assert res.returncode != 0 and limits.is_submit_limit(res.stderr), res.stderr  # Slurm agrees
            # jobs charged to the sub-account meet the parent's cap as well: read, and no room left under it
            in_sub = limits.read_submit_limits(user=SLURM_USER, account="azhpcsub")
            parent = [f for f in in_sub if f.account == account and not f.user]
            assert [f.source for f in parent] == [f"GrpSubmitJobs=4 of account {account} (the parent of azhpcsub's) (sacctmgr)"]
            room = limits.room(in_sub)
            assert room is not None and room[:2] == (0, parent[0])
            res = held_sbatch(tmp_path, "--account=azhpcsub")
            assert res.returncode != 0 and limits.is_submit_limit(res.stderr), res.stderr
    finally:
        sacctmgr("modify", "account", "where", f"name={account}", "set", "GrpSubmitJobs=-1")


def test_slurm_limits_accounts_and_a_partition_down_a_killed_run_left_are_gone_before_the_next_test(slurm_cluster, submit_limit, tmp_path):
    """A run killed inside the MaxSubmitJobs test (a timeout, ^C) skips its clean-up and leaves the limit on the
    testbed's accounting: the next run on that testbed saw every launch refused ("the site allows 3"). What the
    harness runs before each SLURM test (``testbed.sh resume``) removes it, a QOS limit and a side account, and the
    warning names what it removed; a partition left DOWN is set UP the same way."""
    from alphazero_hpc.cluster import limits

    from .conftest import nodes_back_in_service

    if os.geteuid() != 0:
        pytest.skip("the harness repairs the testbed's accounting only as root")
    account = default_account()
    sacctmgr("modify", "user", "where", f"name={SLURM_USER}", f"account={account}", "set", "MaxSubmitJobs=3")
    sacctmgr("modify", "qos", "where", "name=normal", "set", "GrpSubmitJobs=5")
    sacctmgr("add", "account", "azhpcleft")
    sacctmgr("add", "user", SLURM_USER, "account=azhpcleft")
    subprocess.run(["scontrol", "update", "PartitionName=urgent", "State=DOWN"], check=True)  # a test sets one DOWN
    try:
        assert {f.jobs for f in limits.read_submit_limits(user=SLURM_USER)} >= {3}
        with pytest.warns(UserWarning, match=r"(?s)removing submit limits .*azhpc\|3\|.* qos normal\|\|5.*"
                                             r"removing account azhpcleft.*setting partition urgent up"):
            nodes_back_in_service("a test")
        assert "urgent down" not in subprocess.run(["sinfo", "-h", "-o", "%R %a"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["scontrol", "update", "PartitionName=urgent", "State=UP"], check=True)
    assert [f.source for f in limits.read_submit_limits(user=SLURM_USER) if "sacctmgr" in f.source] == []
    accounts = subprocess.run(["sacctmgr", "-nP", "list", "account", "format=account"], capture_output=True, text=True)
    assert "azhpcleft" not in accounts.stdout.split()


def queued_records() -> int:
    return len(user_jobs())


@pytest.mark.slow
def test_slurm_chain_under_a_submit_limit_completes_a_window_at_a_time(submit_limit, slurm_tmp):
    """MaxSubmitJobs=3 and a chain of 8 generations x (1 self-play task + training) = 16 job records, more than five
    times the limit: the launch submits one generation, each training job submits the next from inside its allocation, the run completes,
    and squeue never shows more than 3 of the user's records. A plan that no window can fit is one line naming
    the limit."""
    assert queued_records() == 0, "the testbed must be idle"
    submit_limit(3)
    too_wide = slurm_cli("launch", "--cluster", "slurm", "--tasks", "3", "--gpus-per-node", "0", "--run-dir",
                       str(slurm_tmp / "wide"), *QUICK, "--set", "eval.enabled=false")
    assert too_wide.returncode == 1 and "one generation needs 4 job records" in too_wide.stderr
    assert "MaxSubmitJobs=3" in too_wide.stderr and "lower --tasks to at most 2" in too_wide.stderr
    assert not (slurm_tmp / "wide").exists() and queued_records() == 0

    run = slurm_tmp / "window"
    res = slurm_cli("launch", "--cluster", "slurm", "--tasks", "1", "--gpus-per-node", "0", "--cpus-per-task", "1",
                  "--generations", "8", "--run-dir", str(run), *QUICK, "--set", "eval.enabled=false",
                  "--set", "selfplay.games_per_generation=4", "--set", "selfplay.games_per_shard=2")
    assert res.returncode == 0, res.stderr
    assert "1 generation(s) now (2 job records each; MaxSubmitJobs=3" in res.stdout
    record = json.loads((run / "launch.json").read_text())
    assert {j["generation"] for j in record["jobs"]} == {0}
    seen, deadline = [], time.time() + 600
    while not (run / "models" / "gen-0008.pt").exists() and time.time() < deadline:
        seen.append(queued_records())
        if len(seen) % 40 == 0 and any(g["train"] and g["train"]["state"] == "failed" for g in status_json(run)["generations"]):
            pytest.fail(run_cli("status", str(run)).stdout)
        time.sleep(0.5)
    assert (run / "models" / "gen-0008.pt").exists(), run_cli("status", str(run)).stdout
    assert max(seen) <= 3 and max(seen) >= 2, seen
    st = wait_for_run(run, 120)
    record = json.loads((run / "launch.json").read_text())
    extends = [e for e in record["events"] if e["event"] == "extend"]
    assert [e["generations"] for e in extends] == [[g, g] for g in range(1, 8)]
    trains = [j for j in record["jobs"] if j["stage"] == "train"]
    assert [j["generation"] for j in trains] == list(range(8)) and all(j["attempt"] == 1 for j in trains)
    for g in range(1, 8):  # each generation's self-play waited for the previous training, as in one submission
        array = next(j for j in record["jobs"] if j["stage"] == "selfplay" and j["generation"] == g)
        assert array["dependency"] == f"afterok:{trains[g - 1]['job_id']}"
    assert set(sacct_states([j["job_id"] for j in record["jobs"]]).values()) == {"COMPLETED"}
    assert "chain" not in st
    check_status_matches_disk(run, 8)


def test_the_supervisor_in_process_gives_the_signal_handlers_back(tmp_path):
    """``bench learning`` runs the local supervisor in its own process, then evaluates: SIGTERM must stop it there
    (the supervisor's cancel flag, left installed, made the evaluation ignore SIGTERM)."""
    import signal

    from alphazero_hpc.launch.local import LocalSupervisor
    from alphazero_hpc.launch.start import launch

    launch(tmp_path / "r", str(TINY), ["run.generations=1", "selfplay.games_per_generation=2", "selfplay.games_per_shard=2",
                                        "selfplay.max_plies=10", "eval.enabled=false"], cluster="local", detach=False)
    mine = lambda signum, frame: None  # noqa: E731
    signal.signal(signal.SIGTERM, mine)
    interrupt = signal.getsignal(signal.SIGINT)  # SIG_IGN when the suite was started in the background
    try:
        assert LocalSupervisor(tmp_path / "r").run() == 0
        assert signal.getsignal(signal.SIGTERM) is mine and signal.getsignal(signal.SIGINT) is interrupt
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_the_first_window_under_a_submit_limit(monkeypatch):
    """How many generations launch queues under a limit (2 tasks + training + evaluation = 4 records each), and the
    one-line refusals: a generation that cannot fit at all, and a chain that could not extend itself (the extending
    training job and its evaluation still count while it submits the next generation)."""
    from alphazero_hpc.cluster.limits import SubmitLimit
    from alphazero_hpc.launch import window

    cfg = load_config(TINY, ["slurm.selfplay_tasks=2", "eval.enabled=true"])
    plan = make_plan(cfg, "slurm", array_size=1001)
    from alphazero_hpc.cluster import limits

    queued = {"n": 0}
    monkeypatch.setattr(limits, "queued_records", lambda limit=None, user=None: queued["n"])
    for jobs, gens in ((None, 2), (100, 2), (13, 2), (7, 1), (6, 1)):
        monkeypatch.setattr(window, "read_submit_limits", lambda *a, j=jobs, **k: [SubmitLimit(j, f"MaxSubmitJobs={j}")] if j else [])
        plan2 = make_plan(load_config(TINY, ["slurm.selfplay_tasks=2", "eval.enabled=true", "run.generations=2"]), "slurm",
                          array_size=1001)
        assert window.first_window(cfg, plan2).generations == gens, jobs
    monkeypatch.setattr(window, "read_submit_limits", lambda *a, **k: [SubmitLimit(5, "MaxSubmitJobs=5")])
    with pytest.raises(AzhpcError, match=r"6 records in all, but the site allows 5 \(MaxSubmitJobs=5\): lower --tasks to at most 1"):
        window.first_window(cfg, plan2)
    monkeypatch.setattr(window, "read_submit_limits", lambda *a, **k: [SubmitLimit(3, "MaxSubmitJobs=3")])
    with pytest.raises(AzhpcError, match=r"one generation needs 4 job records .* allows 3"):
        window.first_window(load_config(TINY, ["slurm.selfplay_tasks=2", "eval.enabled=true", "run.generations=1"]),
                            make_plan(load_config(TINY, ["slurm.selfplay_tasks=2", "eval.enabled=true", "run.generations=1"]),
                                      "slurm", array_size=1001))
    monkeypatch.setattr(window, "read_submit_limits", lambda *a, **k: [SubmitLimit(13, "MaxSubmitJobs=13")])
    queued["n"] = 11
    with pytest.raises(AzhpcError, match=r"11 job records already count against MaxSubmitJobs=13 and one generation needs 4 more; wait for some to finish \(squeue -a -r\) and launch again"):
        window.first_window(cfg, plan2)
    # two caps: the one with the least room (an account's, 4 of 5 used by others) is not the lowest (3, unused); a
    # generation of 4 records can never fit under the lowest, and the refusal names that one
    monkeypatch.setattr(window, "read_submit_limits", lambda *a, **k: [
        SubmitLimit(5, "GrpSubmitJobs=5 of account a", account="a"), SubmitLimit(3, "MaxSubmitJobs=3", user="u")])
    monkeypatch.setattr(limits, "queued_records", lambda limit=None, user=None: 4 if limit.account else 0)
    one = load_config(TINY, ["slurm.selfplay_tasks=2", "eval.enabled=true", "run.generations=1"])
    with pytest.raises(AzhpcError, match=r"one generation needs 4 job records .* allows 3 \(MaxSubmitJobs=3\)"):
        window.first_window(one, make_plan(one, "slurm", array_size=1001))
    assert plan.generations == 2


def test_an_extension_stopped_mid_submission_leaves_no_job_unknown(tmp_path, monkeypatch):
    """The chain's extension (inside a training job) records each job as soon as sbatch returns it, so a SIGKILL
    between two submissions leaves no queued job that the run does not know; a SIGTERM (the job ending, or the
    stage's timeout for it) stops it after the sbatch in flight, and it cancels what it submitted and leaves the
    record as it was (whole generations or nothing); where scancel fails, the jobs stay on record."""
    from alphazero_hpc.cluster import scheduler
    from alphazero_hpc.launch import slurm as slurm_mod, window
    from alphazero_hpc.launch.record import JobRecord, LaunchRecord, read_record, write_record
    from alphazero_hpc.store.runconfig import resolve_run_config

    paths = RunPaths(tmp_path / "run")
    cfg = resolve_run_config(paths, TINY, ["run.generations=3", "slurm.selfplay_tasks=2", "eval.enabled=false"])
    paths.logs.mkdir(parents=True, exist_ok=True)
    before = [JobRecord(0, "selfplay", "100", [0, 2]), JobRecord(0, "train", "101", [0, 1], dependency="afterany:100")]
    monkeypatch.setattr(window, "read_submit_limits", lambda *a, **k: [])
    cancelled, calls, scancel_works = [], [], [True]

    def fake_submit(self, what, ex, submit, array_size):
        calls.append(what)
        record = read_record(paths)
        assert record is not None
        on_disk = [j.job_id for j in record.jobs]
        assert on_disk == ["100", "101", *(str(200 + i) for i in range(len(calls) - 1))], (what, on_disk)
        if len(calls) == 2:
            window.STOP_REQUESTED.append("signal SIGTERM")  # arrives while this sbatch runs
        job = str(200 + len(calls) - 1)
        return [f"{job}_{i}" for i in range(array_size)] if array_size else [job]

    monkeypatch.setattr(slurm_mod.SlurmChain, "_submit", fake_submit)

    def fake_cancel(ids):
        cancelled.extend(ids)
        return scancel_works[0]
    monkeypatch.setattr(scheduler, "cancel", fake_cancel)
    for works in (True, False):
        write_record(paths, LaunchRecord(make_plan(cfg, "slurm", array_size=1001), "test", jobs=list(before)))
        calls.clear()
        cancelled.clear()
        window.STOP_REQUESTED.clear()
        scancel_works[0] = works
        with pytest.raises(SystemExit, match="stopped by signal SIGTERM"):
            window.extend_chain(paths, 0)
        window.STOP_REQUESTED.clear()
        assert calls == ["generation 1 self-play array (tasks 0-1)", "generation 1 training job"]  # no third sbatch
        assert cancelled == ["200", "201"]
        record = read_record(paths)
        assert record is not None
        if works:
            assert [j.job_id for j in record.jobs] == ["100", "101"]
        else:
            assert [j.job_id for j in record.jobs] == ["100", "101", "200", "201"]
            assert record.events[-1]["event"] == "extend failed" and record.events[-1]["jobs"] == ["200", "201"]


def test_an_extension_refused_by_the_limit_waits_for_room_then_gives_up_in_one_line(tmp_path, monkeypatch):
    """The controller still counts a job that has just ended: a training job's extension that sbatch refuses for the
    submit limit cancels what it had submitted of the generation and tries again until ``wait_s``; refused all the
    while, it raises one line naming the limit, with the record as it was."""
    from alphazero_hpc.cluster import scheduler
    from alphazero_hpc.cluster.limits import SubmitLimit
    from alphazero_hpc.launch import slurm as slurm_mod, window
    from alphazero_hpc.launch.record import JobRecord, LaunchRecord, read_record, write_record
    from alphazero_hpc.store.runconfig import resolve_run_config

    paths = RunPaths(tmp_path / "run")
    cfg = resolve_run_config(paths, TINY, ["run.generations=2", "slurm.selfplay_tasks=1", "eval.enabled=false"])
    paths.logs.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(window, "read_submit_limits", lambda *a, **k: [SubmitLimit(3, "MaxSubmitJobs=3")])
    from alphazero_hpc.cluster import limits

    monkeypatch.setattr(limits, "queued_records", lambda limit=None, user=None: 1)  # the extending training job
    monkeypatch.setattr(window, "LIMIT_POLL_S", 0.01)
    calls, cancelled, refusals = [], [], [0]

    def fake_submit(self, what, ex, submit, array_size):
        calls.append(what)
        if "training" in what and refusals[0] > 0:
            refusals[0] -= 1
            raise AzhpcError(f"sbatch refused the {what}: error: AssocMaxSubmitJobLimit; the site's submit limit is "
                             "MaxSubmitJobs=3: set slurm.max_submit_jobs below it")
        job = str(200 + len(calls))
        return [f"{job}_{i}" for i in range(array_size)] if array_size else [job]

    monkeypatch.setattr(slurm_mod.SlurmChain, "_submit", fake_submit)

    def fake_cancel(ids):
        cancelled.extend(ids)
        return True
    monkeypatch.setattr(scheduler, "cancel", fake_cancel)
    before = [JobRecord(0, "selfplay", "100", [0, 1]), JobRecord(0, "train", "101", [0, 1], dependency="afterok:100")]
    write_record(paths, LaunchRecord(make_plan(cfg, "slurm", array_size=1001), "test", jobs=list(before)))
    refusals[0] = 2
    new = window.extend_chain(paths, 0, wait_s=5)
    assert calls == ["generation 1 self-play array (tasks 0-0)", "generation 1 training job"] * 3
    assert cancelled == ["201", "203"]  # each refused attempt's self-play array, nothing else
    assert [j.job_id for j in new] == ["205", "206"]
    record = read_record(paths)
    assert record is not None and [j.job_id for j in record.jobs] == ["100", "101", "205", "206"]

    write_record(paths, LaunchRecord(make_plan(cfg, "slurm", array_size=1001), "test", jobs=list(before)))
    calls.clear()
    cancelled.clear()
    refusals[0] = 10**6
    with pytest.raises(window.NoRoom, match="MaxSubmitJobs=3"):
        window.extend_chain(paths, 0, wait_s=0.2)
    assert 2 < len(calls) and len(cancelled) == len(calls) // 2
    record = read_record(paths)
    assert record is not None and [j.job_id for j in record.jobs] == ["100", "101"]


def test_the_submit_limit_is_read_for_the_account_and_qos_the_jobs_use(monkeypatch):
    """A user with associations in two accounts: the limit is the one of the account the jobs are charged to
    (slurm.account, else the user's default account), with that account's own GrpSubmitJobs, and of the QOS they
    run under (slurm.qos, else the association's default QOS)."""
    from alphazero_hpc.cluster import limits

    answers = {
        "show user alice format=DefaultAccount": "physics\n",
        "show assoc where user=alice format=Account,MaxSubmit,GrpSubmit,QOS,DefaultQOS":
            "physics|40||normal,long|normal\nchem|200||normal,short|short\n",
        "show assoc where account=physics format=User,GrpSubmit,ParentName": "|30|science\nalice||\n",
        "show assoc where account=science format=User,GrpSubmit,ParentName": "|500|root\n",
        "show assoc where account=root format=User,GrpSubmit,ParentName": "||\n",
        "show assoc where account=chem format=User,GrpSubmit,ParentName": "||science\nalice||\n",
        "show qos where name=normal format=Name,MaxSubmitPU,GrpSubmit": "normal|100|\n",
        "show qos where name=short format=Name,MaxSubmitPU,GrpSubmit": "short|150|\n",
        "show qos where name=long format=Name,MaxSubmitPU,GrpSubmit": "long|10|\n",
    }
    monkeypatch.setattr(limits, "run_quietly", lambda cmd: answers.get(" ".join(cmd[2:]), "") if cmd[0] == "sacctmgr" else "")
    assert limits.read_submit_limit(user="alice").source == "GrpSubmitJobs=30 of account physics (sacctmgr)"
    chem = limits.read_submit_limit(user="alice", account="chem")
    assert (chem.jobs, chem.source) == (150, "MaxSubmitJobsPerUser=150 of QOS short (sacctmgr)")
    assert limits.read_submit_limit(user="alice", account="chem", qos="long").jobs == 10
    assert limits.read_submit_limit(user="alice", account="chem", qos="normal").jobs == 100
    assert limits.read_submit_limit(7, user="alice", account="chem").source == "slurm.max_submit_jobs=7"
    # a parent account's GrpSubmitJobs caps its sub-accounts' jobs too (sbatch checks every one up to the root)
    assert [f.source for f in limits.read_submit_limits(user="alice", account="chem") if f.account and not f.user] == [
        "GrpSubmitJobs=500 of account science (the parent of chem's) (sacctmgr)"]


def test_each_submit_limit_counts_the_records_of_its_own_scope(monkeypatch):
    """The user's association counts the user's jobs in its account, the account's GrpSubmitJobs every user's jobs in
    it, a QOS's per-user cap the user's jobs under it, MaxJobCount every job; the window takes the least room. Here
    alice has 30 jobs under account chem, which do not count against MaxSubmitJobs=40 of her physics association, and
    bob's 25 and her own 3 under physics count against that account's GrpSubmitJobs=30: 2 records of room, that cap's."""
    from alphazero_hpc.cluster import limits

    queue = [("alice", "chem", "normal")] * 30 + [("bob", "physics", "normal")] * 25 + [("alice", "physics", "normal")] * 3

    def squeue(args: list[str]) -> str:
        want = dict(zip(args[::2], args[1::2]))
        keep = [j for j in queue if want.get("-u", j[0]) == j[0] and want.get("-A", j[1]) == j[1]
                and want.get("-q", j[2]) == j[2]]
        return "".join(f"{100 + i}\n" for i in range(len(keep)))

    answers = {
        "show user alice format=DefaultAccount": "physics\n",
        "show assoc where user=alice format=Account,MaxSubmit,GrpSubmit,QOS,DefaultQOS":
            "physics|40||normal|normal\nchem|200||normal|normal\n",
        "show assoc where account=physics format=User,GrpSubmit,ParentName": "|30|root\nalice||\nbob||\n",
        "show qos where name=normal format=Name,MaxSubmitPU,GrpSubmit": "normal|50|\n",
    }
    assoc_mgr = {  # the controller's counts: what sbatch checks (here no higher than squeue's, but for alice's 4)
        "users=alice flags=assoc": "ClusterName=c Account=physics UserName=alice(1000) Partition= GrpSubmitJobs=N(4)\n"
                                   "ClusterName=c Account=chem UserName=alice(1000) Partition= GrpSubmitJobs=N(30)\n",
        "accounts=physics flags=assoc": "ClusterName=c Account=physics UserName= Partition= ParentAccount=root(1) "
                                        "GrpSubmitJobs=30(28)\nClusterName=c Account=physics UserName=bob(1001) "
                                        "Partition= GrpSubmitJobs=N(25)\n",
        "qos=normal flags=qos": "QOS=normal(1) GrpJobs=N(0) GrpSubmitJobs=N(58) MaxWallPJ= Account Limits= physics="
                                "{MaxSubmitJobsPA=N(28)} User Limits= 1001={MaxSubmitJobsPU=50(25)} "
                                "1000={MaxJobsPU=N(0) MaxSubmitJobsPU=50(33) MaxTRESPU=cpu=N(0)}\n",
    }

    def run(cmd: list[str]) -> str:
        if cmd[0] == "sacctmgr":
            return answers.get(" ".join(cmd[2:]), "")
        if cmd[0] == "squeue":
            assert cmd[:4] == ["squeue", "-h", "-r", "-a"] and cmd[-2:] == ["-o", "%i"]
            return squeue(cmd[4:-2])
        return assoc_mgr.get(" ".join(cmd[4:]), "") if cmd[:4] == ["scontrol", "-o", "show", "assoc_mgr"] else ""

    monkeypatch.setattr(limits, "run_quietly", run)
    monkeypatch.setattr(limits, "_uid", {"alice": 1000, "bob": 1001}.get)
    found = limits.read_submit_limits(user="alice")
    counts = {f.source.split(" (")[0]: limits.queued_records(f) for f in found}
    assert counts == {"MaxSubmitJobs=40 of user alice's association in account physics": 4,  # the controller's 4 > squeue's 3
                      "GrpSubmitJobs=30 of account physics": 28, "MaxSubmitJobsPerUser=50 of QOS normal": 33}
    room = limits.room(found)
    assert room is not None
    free, limit, queued = room
    assert (free, queued, limit.source) == (2, 28, "GrpSubmitJobs=30 of account physics (sacctmgr)")
    assert limits.queued_records(user="alice") == 34  # no limit given: every record of the user (the controller's 4 + 30)
    assert limits.room([]) is None
    # what squeue cannot list in a scope, the controller counts: a sub-account's 2 jobs against physics' GrpSubmitJobs
    # (squeue -A physics does not list them), and under the QOS jobs of users that PrivateData hides
    assoc_mgr["accounts=physics flags=assoc"] = assoc_mgr["accounts=physics flags=assoc"].replace("30(28)", "30(30)")
    assoc_mgr["qos=normal flags=qos"] = assoc_mgr["qos=normal flags=qos"].replace("MaxSubmitJobsPU=50(33)", "MaxSubmitJobsPU=50(36)")
    counts = {f.source.split(" (")[0]: limits.queued_records(f) for f in found}
    assert counts == {"MaxSubmitJobs=40 of user alice's association in account physics": 4,
                      "GrpSubmitJobs=30 of account physics": 30, "MaxSubmitJobsPerUser=50 of QOS normal": 36}
    room = limits.room(found)
    assert room is not None and room[:2] == (0, found[1])
    group = limits.SubmitLimit(100, "GrpSubmitJobs=100 of QOS normal (sacctmgr)", qos="normal")
    assert limits.queued_records(group) == 58 and limits.controller_count(limits.SubmitLimit(5, "x")) is None
    # no default QOS: the jobs may run under either allowed QOS, so a group cap (everyone's jobs) of one of them is
    # not applied, the per-user caps are; named with slurm.qos, that QOS's group cap is
    answers["show assoc where user=alice format=Account,MaxSubmit,GrpSubmit,QOS,DefaultQOS"] = "physics|||debug,normal|\n"
    answers["show qos where name=debug,normal format=Name,MaxSubmitPU,GrpSubmit"] = "debug|20|5\nnormal|50|\n"
    answers["show qos where name=debug format=Name,MaxSubmitPU,GrpSubmit"] = "debug|20|5\n"
    assert sorted(f.source.split(" (")[0] for f in limits.read_submit_limits(user="alice") if f.qos) == [
        "MaxSubmitJobsPerUser=20 of QOS debug", "MaxSubmitJobsPerUser=50 of QOS normal"]
    assert limits.read_submit_limit(user="alice", qos="debug").source == "GrpSubmitJobs=5 of QOS debug (sacctmgr)"


def test_resume_gives_every_training_job_it_keeps_or_submits_its_evaluation(tmp_path, monkeypatch):
    """With eval.enabled, resume leaves a generation with exactly one live evaluation after its live training job: a
    training job submitted again gets a new one (the old one waited for the failed job), a kept training job without
    one (an extension stopped between the two sbatch calls) gets one, and one already waiting is kept."""
    from alphazero_hpc.cluster import scheduler
    from alphazero_hpc.cluster.scheduler import JobState
    from alphazero_hpc.launch import plan as planning, resume as resume_mod, slurm as slurm_mod, window
    from alphazero_hpc.launch.record import JobRecord, LaunchRecord, read_record, write_record
    from alphazero_hpc.net.checkpoint import ensure_initial_checkpoint
    from alphazero_hpc.store import atomic
    from alphazero_hpc.store.progress import TaskProgress
    from alphazero_hpc.store.runconfig import resolve_run_config

    paths = RunPaths(tmp_path / "run")
    cfg = resolve_run_config(paths, TINY, ["run.generations=1", "slurm.selfplay_tasks=1", "eval.enabled=true"])
    ensure_initial_checkpoint(paths.model(0), cfg.model, 0)
    paths.progress(0, 0).parent.mkdir(parents=True)
    atomic.write_json(paths.progress(0, 0), TaskProgress(0, 0, 1, 16, 4, status="done").to_json())
    paths.logs.mkdir(parents=True)
    submitted: list[str] = []

    def fake_submit(self, what, ex, submit, array_size):
        submitted.append(what)
        return [str(300 + len(submitted))]

    monkeypatch.setattr(slurm_mod.SlurmChain, "_submit", fake_submit)
    monkeypatch.setattr(scheduler, "cancel", lambda ids: True)
    monkeypatch.setattr(planning, "detect_cluster", lambda: "slurm")
    monkeypatch.setattr(window, "read_submit_limits", lambda *a, **k: [])
    jobs = [JobRecord(0, "selfplay", "100", [0, 1]), JobRecord(0, "train", "101", [0, 1], dependency="afterany:100")]
    evaluation = JobRecord(0, "eval", "102", [0, 1], dependency="afterok:101")
    cases = [  # (train state, eval job or None, eval state) -> what resume submits
        ("FAILED", evaluation, "CANCELLED", ["generation 0 training job", "generation 1 evaluation job"]),
        ("RUNNING", None, None, ["generation 1 evaluation job"]),
        ("RUNNING", evaluation, "PENDING", []),
    ]
    for train_state, ev, ev_state, expected in cases:
        write_record(paths, LaunchRecord(make_plan(cfg, "slurm", array_size=1001), "test", jobs=jobs + ([ev] if ev else [])))
        states = {"100": JobState("COMPLETED"), "101": JobState(train_state)}
        if ev:
            assert ev_state is not None
            states["102"] = JobState(ev_state)
        monkeypatch.setattr(scheduler, "query", lambda ids, user=None, s=states: s)
        submitted.clear()
        resume_mod.resume(paths.root)
        assert submitted == expected, (train_state, ev_state, submitted)
        record = read_record(paths)
        assert record is not None
        trains = [j for j in record.jobs if j.stage == "train"]
        if expected:
            assert record.jobs[-1].stage == "eval" and record.jobs[-1].dependency == f"afterok:{trains[-1].job_id}"
