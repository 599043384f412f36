"""The stall rule (issue 29): a stage that makes progress in every slice (job attempt) is run again as often as it
needs; once ``slurm.max_attempts`` slices in a row end without progress it gives up in one line."""

import pytest

from alphazero_hpc.cluster.preempt import Deadline
from alphazero_hpc.errors import AzhpcError
from alphazero_hpc.search.fakes import UniformEvaluator
from alphazero_hpc.selfplay.task import run_selfplay_task
from alphazero_hpc.store import atomic
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.progress import read_task_progress, stalled_slices

from .conftest import TINY
from .test_selfplay_task import FAST
from .test_train import make_run, train


def test_stalled_slices_counts_attempts_in_a_row_without_progress_and_resets_on_progress():
    marks = [0, 0, 0, 2, 2, 5, 5, 5, 5]  # progress measure at the start of each attempt
    stalled, previous, seen = 0, -1, []
    for mark in marks:
        stalled = stalled_slices(previous, stalled, mark)
        previous = mark
        seen.append(stalled)
    assert seen == [0, 1, 2, 0, 1, 0, 1, 2, 3]
    assert stalled_slices(-1, 7, 0) == 0  # no previous attempt (or a finished one)


class _Short(Deadline):
    """A job with ten seconds left: below slurm.stop_margin_s, so the attempt ends without a shard."""

    def remaining(self) -> float:
        return 10.0


def test_selfplay_task_gives_up_after_max_attempts_slices_without_a_shard(tmp_path):
    overrides = [*FAST, "slurm.max_attempts=3"]
    for attempt in range(3):  # each start is too late for a shard: a stopped slice (requeued), not a failure
        p = run_selfplay_task(tmp_path, 0, 0, 1, TINY, overrides, evaluator=UniformEvaluator(2), deadline=_Short(None))
        assert p.status == "stopped" and "started with 10 s left, below slurm.stop_margin_s" in p.error
        progress = read_task_progress(RunPaths(tmp_path).progress(0, 0))
        assert progress is not None and progress.stalled == attempt
    # the line says why the last slice stopped: here each start came too late, which a shorter shard would not fix
    with pytest.raises(AzhpcError, match=r"self-play task 0 made no progress in 3 slices in a row \(slurm.max_attempts=3\): "
                                         r"still at 0 of \d+ shards \(the last slice: the job started with 10 s left, "
                                         r"below slurm.stop_margin_s .*\); a shard must fit in one slice.* or lower "
                                         r"slurm.stop_margin_s"):
        run_selfplay_task(tmp_path, 0, 0, 1, TINY, overrides, evaluator=UniformEvaluator(2))
    progress = read_task_progress(RunPaths(tmp_path).progress(0, 0))
    assert progress is not None and progress.status == "failed" and "no progress in 3 slices" in progress.error


def test_selfplay_task_with_progress_in_every_slice_runs_on(tmp_path):
    """A slice ends after each shard (the stop margin eats the rest): more slices than max_attempts, each with
    a new shard, and the task finishes."""
    overrides = [*FAST, "slurm.max_attempts=1"]
    slices = 0
    while True:
        slices += 1
        p = run_selfplay_task(tmp_path, 0, 0, 1, TINY, overrides, evaluator=UniformEvaluator(2), deadline=_OneShard(None))
        assert p.stalled == 0
        if p.status == "done":
            break
    assert slices > 2 and p.shards_done == p.shards_target


class _OneShard(Deadline):
    """Time for the first shard only: the start check sees hours left, every later look none (the pacer always
    starts an attempt's first shard, and no other)."""

    def __init__(self, end) -> None:  # noqa: ANN001
        super().__init__(end)
        self.looks = 0

    def remaining(self) -> float:
        self.looks += 1
        return 10_000.0 if self.looks == 1 else 0.0


def test_training_gives_up_after_max_attempts_slices_without_a_later_state(tmp_path):
    paths = make_run(tmp_path)
    paths.train_slices(1).parent.mkdir(parents=True, exist_ok=True)
    late = "stopped: the job started with 18 s left, below slurm.stop_margin_s (40 s)"
    atomic.write_json(paths.train_slices(1), {"start_step": 0, "stalled": 2,  # two attempts ended without a save
                                              "slices": [{"start_step": 0, "end_step": 0, "ended": late}] * 2})
    res = train(tmp_path)
    assert res.returncode != 0 and not paths.model(1).exists()
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "generation 0 training made no progress in 3 slices in a row" in errors[0], res.stderr[-2000:]
    # why the last slice stopped, and the fix for a start-up that eats the window
    assert "(the last slice: the job started with 18 s left, below slurm.stop_margin_s (40 s));" in errors[0], errors
    assert "lower slurm.stop_margin_s" in errors[0], errors
    assert "Traceback" not in res.stderr
    atomic.write_json(paths.train_slices(1), {"start_step": 0, "stalled": 1})  # one short of the bound: it trains
    res = train(tmp_path)
    assert res.returncode == 0 and paths.model(1).exists(), res.stderr[-2000:]


def test_training_that_starts_too_late_for_a_step_is_a_stopped_slice(tmp_path):
    """A training job whose slice starts with less than the stop margin left (a loaded node) stops at once and is
    requeued; the stall rule counts it, so a slow host makes more slices, not a failure."""
    from alphazero_hpc.train.trainer import DistEnv, Trainer

    paths = make_run(tmp_path)
    outcome = Trainer(paths.root, 0, DistEnv(), 0, "cpu", _Short(None)).run()
    assert outcome.status == "stopped" and "started with 10 s left, below slurm.stop_margin_s" in outcome.message
    assert outcome.step == 0 and not paths.model(1).exists()
    record = atomic.read_json(paths.train_slices(1))
    assert (record["start_step"], record["stalled"]) == (0, 0)
    assert Trainer(paths.root, 0, DistEnv(), 0, "cpu", _Short(None)).run().status == "stopped"
    record = atomic.read_json(paths.train_slices(1))
    assert record["stalled"] == 1
    # each slice is on record: where it started and ended, and why it stopped
    assert [(s["start_step"], s["end_step"]) for s in record["slices"]] == [(0, 0), (0, 0)]
    assert all(s["ended"].startswith("stopped: the job started with 10 s left") for s in record["slices"])


def test_a_finished_stage_ignores_the_time_limits_usr2():
    """A slice that finishes as its time limit's USR2 arrives: the signal, landing after the stage returned done,
    killed the process at exit and SLURM recorded the finished training job as FAILED (the suite's time-limit test,
    under load). A done stage ignores USR2 from then on; a stopped one keeps its handler (it is being requeued)."""
    import signal

    from alphazero_hpc.launch.stages import StageResult, _finished

    before = signal.getsignal(signal.SIGUSR2)
    mine = lambda signum, frame: None  # noqa: E731
    try:
        signal.signal(signal.SIGUSR2, mine)
        _finished(StageResult("train", "stopped", {}))
        assert signal.getsignal(signal.SIGUSR2) is mine
        _finished(StageResult("train", "done", {}))
        assert signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR2, before)


def test_a_child_tied_to_its_parent_dies_with_it():
    """The training stage starts torchrun with ``procs.die_with_parent``: a stage killed hard must not leave its
    ranks training beside the next attempt's. A parent that starts a sleeper that way, SIGKILLed: the sleeper ends."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from alphazero_hpc.launch.record import pid_alive

    code = ("import subprocess, sys; from alphazero_hpc.cluster.procs import die_with_parent; "
            "p = subprocess.Popen(['sleep', '60'], preexec_fn=die_with_parent); print(p.pid, flush=True); p.wait()")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert pid_alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 10
    while pid_alive(child) and time.time() < deadline:
        time.sleep(0.05)
        try:  # reparented to init (or a subreaper): reap it ourselves if we can
            os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            pass
    assert not pid_alive(child)


def test_a_killed_slice_is_named_in_the_stall_line_of_import_and_training(tmp_path):
    """A slice that SLURM killed before it could record an end (an import shard longer than the slice, a training
    step past the limit) leaves its progress at running, or its slice without ``ended``: the stall line says it was
    killed, which the job log confirms, instead of saying nothing of the last slice."""
    from alphazero_hpc.pgn.task import ImportSpec, run_import_task
    from alphazero_hpc.store.progress import ImportProgress, KILLED

    pgn = tmp_path / "one.pgn"
    pgn.write_text('[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n')
    spec = ImportSpec.of([pgn], 1, 0, games_per_shard=4)
    paths = RunPaths(tmp_path / "imp")
    paths.import_progress(0).parent.mkdir(parents=True)
    killed = ImportProgress(0, 1, status="running", attempt=3, start_mark=0, stalled=2)
    killed.write(paths.import_progress(0))
    with pytest.raises(AzhpcError, match=r"import task 0 made no progress in 3 slices in a row .* \(the last slice: "
                                         + KILLED.replace("(", r"\(").replace(")", r"\)") + r"\); a shard must fit"):
        run_import_task(paths.root, spec, 0, config_path=TINY)

    run = make_run(tmp_path / "train")
    run.train_slices(1).parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(run.train_slices(1), {"start_step": 0, "stalled": 2, "slices": [{"start_step": 0}] * 2})
    res = train(tmp_path / "train")
    errors = [line for line in res.stderr.splitlines() if line.startswith("Error")]
    assert res.returncode != 0 and len(errors) == 1 and f"(the last slice: {KILLED});" in errors[0], res.stderr[-2000:]
