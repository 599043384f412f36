"""The search pool's network on the CPU: the thread count is measured, not guessed."""

import io
import os
import time

import numpy as np

from alphazero_hpc.net.cputhreads import ThreadTuner, thread_choices


class ThreadedFake:
    """A network whose speed depends on its thread count: 2 threads are slow, as when idle OpenMP threads
    spin on the cores the search workers need."""

    def __init__(self, threads: int = 4, fast: int = 1) -> None:
        self.threads, self.fast, self.history = threads, fast, 1

    def cpu_threads(self) -> int:
        return self.threads

    def set_threads(self, n: int) -> None:
        self.threads = n

    def evaluate(self, planes):
        time.sleep(0.0005 if self.threads == self.fast else 0.002)
        return np.zeros((len(planes), 4672), np.float32), np.zeros(len(planes), np.float32)


def _serve(ev, tuner, seconds=5.0):
    done, t_end = 0, time.perf_counter() + seconds
    while tuner.tuning and time.perf_counter() < t_end:
        done += len(ev.evaluate(np.zeros((8, 1))) [1])
        tuner.tick(done)


def test_thread_choices():
    assert thread_choices(2, 1) == [1, 2]
    assert thread_choices(2, 2) == [1, 2]
    assert thread_choices(16, 15) == [1, 16]
    assert thread_choices(16, 4) == [1, 12, 16]
    assert thread_choices(1, 3) == [1]


def test_tuner_keeps_the_fastest_count_says_so_and_restores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    monkeypatch.delenv("AZHPC_TORCH_THREADS", raising=False)
    for fast in (1, 2, 4):
        ev, log = ThreadedFake(threads=4, fast=fast), io.StringIO()
        tuner = ThreadTuner(ev, workers=2, window_s=0.1, log=log)
        assert tuner.choices == [1, 2, 4] and tuner.tuning
        _serve(ev, tuner)
        assert tuner.chosen == fast and ev.threads == fast
        assert set(tuner.rates) == {1, 2, 4} and max(tuner.rates, key=tuner.rates.__getitem__) == fast
        assert f"using {fast}" in log.getvalue() and log.getvalue().count("\n") == 1
        tuner.restore()
        assert ev.threads == 4


def test_tuner_takes_turns_so_that_drift_hits_every_count_alike(monkeypatch):
    """The machine slows down while the tuner measures: measured one after the other, the last count (here the
    fastest) would look slowest; taking turns in slices keeps the right one."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    monkeypatch.delenv("AZHPC_TORCH_THREADS", raising=False)

    class Drifting(ThreadedFake):
        t0 = None

        def evaluate(self, planes):
            self.t0 = self.t0 or time.perf_counter()
            # 4x slower after 1.5 s. Sleeps of 5 and 10 ms, not 1 and 2: on a loaded host a sleep's wake-up comes a
            # millisecond or more late, which made 1 and 2 ms look alike (the suite beside a match chose 1 thread)
            slower = 1 + 2 * (time.perf_counter() - self.t0)
            time.sleep((0.005 if self.threads == self.fast else 0.010) * slower)
            return np.zeros((len(planes), 4672), np.float32), np.zeros(len(planes), np.float32)

    ev = Drifting(threads=1, fast=4)
    tuner = ThreadTuner(ev, workers=2, window_s=0.5, rounds=3, log=io.StringIO())
    _serve(ev, tuner, seconds=30.0)
    assert tuner.chosen == 4, tuner.rates


def test_tuner_does_not_count_a_lull_in_the_work(monkeypatch):
    """Ticks while not every worker is busy (starting, restarting, out of games) restart the slice; a task whose
    work ends before the measurement does says so when it restores the count, instead of logging rates of idle
    time."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(2)), raising=False)
    monkeypatch.delenv("AZHPC_TORCH_THREADS", raising=False)
    ev, log = ThreadedFake(threads=2, fast=2), io.StringIO()
    tuner = ThreadTuner(ev, workers=1, window_s=0.2, rounds=2, log=log)
    done, lulls = 0, 0
    while tuner.tuning:
        if ev.threads == 2 and lulls < 20:  # the fast count's slices meet a lull: time passes, nothing is evaluated
            time.sleep(0.01)
            tuner.tick(done, busy=False)
            lulls += 1
            continue
        done += len(ev.evaluate(np.zeros((8, 1)))[1])
        tuner.tick(done, busy=True)
    assert lulls == 20 and tuner.chosen == 2 and tuner.rates[2] > 2 * tuner.rates[1], tuner.rates
    assert log.getvalue().count("using 2") == 1

    log = io.StringIO()
    idle = ThreadTuner(ThreadedFake(threads=2), workers=1, window_s=0.2, log=log)
    for _ in range(30):
        time.sleep(0.01)
        idle.tick(8, busy=False)
    idle.tick(16, busy=True)
    assert idle.tuning and idle.rates == {}
    idle.restore()
    assert "the work ended before the thread count was measured" in log.getvalue() and "/s" not in log.getvalue()


def test_tuner_leaves_alone_a_fixed_count_a_gpu_and_a_fake_evaluator(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    monkeypatch.setenv("AZHPC_TORCH_THREADS", "3")
    ev = ThreadedFake(threads=3)
    tuner = ThreadTuner(ev, workers=2, window_s=0.05, log=io.StringIO())
    assert not tuner.tuning and tuner.chosen is None
    _serve(ev, tuner, 0.3)
    assert ev.threads == 3
    monkeypatch.delenv("AZHPC_TORCH_THREADS")

    class Gpu(ThreadedFake):
        def cpu_threads(self):
            return None  # TorchEvaluator on CUDA

    assert not ThreadTuner(Gpu(), workers=2).tuning
    assert not ThreadTuner(object(), workers=2).tuning  # no set_threads: a fake evaluator


def test_torch_evaluator_reports_and_sets_its_cpu_threads():
    import torch

    from alphazero_hpc.config import load_config
    from alphazero_hpc.net.inference import TorchEvaluator
    from alphazero_hpc.net.model import build_model

    from .conftest import TINY

    cfg = load_config(TINY)
    ev = TorchEvaluator(build_model(cfg.model, seed=0), "cpu")
    before = torch.get_num_threads()
    try:
        ev.set_threads(1)
        assert ev.cpu_threads() == 1 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_gpu_utilisation_is_the_mean_of_samples_over_the_window():
    from alphazero_hpc.tools.bench import GpuUtilisation

    values = iter([40.0, 60.0, 80.0] + [60.0] * 1000)
    with GpuUtilisation("cuda", every_s=0.01, read=lambda: next(values)) as gpu:
        time.sleep(0.1)
    assert len(gpu.samples) >= 5 and gpu.mean is not None and abs(gpu.mean - 0.6) < 0.05 and gpu.note == ""

    def no_nvml():
        raise ModuleNotFoundError("pynvml does not seem to be installed")

    with GpuUtilisation("cuda", read=no_nvml) as gpu:
        pass
    assert gpu.mean is None and "nvidia-ml-py" in gpu.note
    with GpuUtilisation("cpu") as gpu:
        pass
    assert gpu.mean is None and gpu.note == ""


def test_pool_benchmark_reports_where_the_workers_time_goes():
    from alphazero_hpc.tools.bench import bench_selfplay
    from alphazero_hpc.config import load_config
    from alphazero_hpc.search.fakes import UniformEvaluator

    from .conftest import TINY

    cfg = load_config(TINY)
    r = bench_selfplay(cfg, "tiny", "cpu", seconds=2.0, warmup_s=1.0, evaluator=UniformEvaluator(2), workers=2)
    assert r.simulations > 0 and r.network_threads is None  # a fake evaluator: nothing to tune
    shares = r.worker_time
    assert shares is not None
    assert set(shares) == {"network_wait", "rules", "tree", "encode"}
    # shares of the window's wall time; the counters lag a step, and on a loaded machine (a rating beside the suite
    # read 0.35) much of a worker's window can pass off the CPU between counted phases: no lower bound but > 0
    assert all(0 <= v <= 1.05 for v in shares.values()) and 0 < sum(shares.values()) <= 1.1
    outside = r.cpu_us_per_simulation_outside_network
    assert shares["rules"] > 0 and outside is not None and outside > 0
    # each worker's CPU seconds per wall second: some, and at most one core's (a worker is one thread, no torch); not a
    # floor above 0, which a loaded machine breaks (0.08-0.09 each beside a rating and the SLURM tests, 2026-12-05)
    assert r.cpu_workers is not None and len(r.cpu_workers) == 2 and all(0 < c <= 1.05 for c in r.cpu_workers)
    assert "search workers' time" in r.render() and "CPU cores used" in r.render()


def test_single_process_benchmark_with_the_net_on_the_cpu(capsys):
    """The K=0 benchmark with the real tiny net: figures that hang together, and the pipeline-on-CPU line that
    a self-play task prints (a benchmark run with the cluster preset on a laptop would otherwise mislead)."""
    import dataclasses

    from alphazero_hpc.tools.bench import bench_selfplay
    from alphazero_hpc.config import load_config

    from .conftest import TINY

    cfg = load_config(TINY)
    cfg = dataclasses.replace(cfg, selfplay=dataclasses.replace(cfg.selfplay, pipeline=True))
    r = bench_selfplay(cfg, "tiny", "cpu", seconds=1.5, warmup_s=0.5)
    assert capsys.readouterr().err.count("selfplay.pipeline is on but the network runs on the CPU") == 1
    assert r.simulations > 0 and r.evaluations > 0 and r.raw_evaluations_per_s > 0
    assert abs(r.ratio - r.evaluations_per_s / r.raw_evaluations_per_s) < 1e-9
    assert 0 < r.batch_fill <= 1 and r.bytes_per_position is not None and r.bytes_per_position > 0
    shares = [s for s in (r.share_network, r.share_rules, r.share_tree, r.share_encoding) if s is not None]
    assert len(shares) == 4 and abs(sum(shares) - 1) < 1e-6, r


def test_bench_vary_measures_each_config_value_in_one_run():
    """``bench selfplay --vary KEY=A,B`` runs the benchmark once per value with that value applied (an A/B in one
    process) and compares them."""
    import json

    from .conftest import run_cli

    out = run_cli("bench", "selfplay", "--config", "configs/tiny.yaml", "--seconds", "1", "--evaluator", "uniform",
                  "--vary", "selfplay.games_in_flight=4,6", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert [m["games_in_flight"] for m in d["medians"]] == [4, 6]
    assert set(d["cpu_us_per_simulation_outside_network_every_run"]) == {"selfplay.games_in_flight=4",
                                                                          "selfplay.games_in_flight=6"}
    bad = run_cli("bench", "selfplay", "--config", "configs/tiny.yaml", "--vary", "mcts.lazy_rows")
    assert bad.returncode != 0 and "SECTION.KEY=V1,V2" in bad.stderr
