"""``azhpc bench selfplay``: how close self-play comes to the network's own speed, measured in one run.

It plays games with a config's network (random weights) for a while, then times the same network alone at
the mean batch size the search produced, in the same process. The headline is the ratio of evaluations per
second inside self-play to that raw rate: 1.0 means Python costs nothing. It also reports CPU microseconds
per simulation outside the network and the time split, and the bytes per position of a shard written from
the games played.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import threading
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..config import Config
from ..net.cputhreads import network_cpu_threads, warn_pipeline_on_cpu
from ..game.encoding import num_planes
from ..selfplay.engine import SelfPlayEngine, group_widths
from ..selfplay.plan import GameSpec


@dataclass
class SelfPlayBench:
    config: str
    device: str
    games_in_flight: int
    workers: int  # search processes sharing the network (0: one process searches and evaluates)
    seconds: float
    simulations: int
    simulations_per_s: float
    evaluations: int
    evaluations_per_s: float
    positions: int
    positions_per_s: float
    mean_batch: float
    batch_fill: float  # mean batch / the largest batch the search can form (one pipeline half per process)
    raw_evaluations_per_s: float
    ratio: float  # evaluations_per_s / raw_evaluations_per_s
    cpu_us_per_simulation_outside_network: float | None  # search workers: their time not waiting, per simulation
    share_network: float | None  # this and the rest: single-process only
    share_rules: float | None
    share_tree: float | None
    share_encoding: float | None
    shard_io_s: float | None
    bytes_per_position: float | None
    # search pool only (workers > 0):
    network_threads: int | None = None  # torch threads the server's network ran with on the CPU (tuned)
    thread_rates: dict | None = None  # evaluations/s the server measured at each thread count while tuning
    raw_every_core_per_s: float | None = None  # raw rate with torch's own thread count (every core)
    network_busy: float | None = None  # share of the window the server spent inside the network
    cpu_server: float | None = None  # CPU cores used by the server process over the window
    cpu_workers: list | None = None  # the same for each search worker
    worker_time: dict | None = None  # share of the workers' time waiting for the network, in chess rules, tree, encoding
    gpu_utilisation: float | None = None  # mean of NVML's GPU utilisation over the window (CUDA only)
    gpu_note: str = ""  # why there is no GPU figure on a CUDA device

    def render(self) -> str:
        who = f"{self.workers} search workers x " if self.workers else ""
        lines = [
            f"config {self.config} on {self.device}, {who}{self.games_in_flight} games in flight, {self.seconds:.1f} s",
            f"simulations/s            {self.simulations_per_s:10.1f}",
            f"positions/s              {self.positions_per_s:10.2f}  ({self.positions} recorded)",
            f"network evaluations/s    {self.evaluations_per_s:10.1f}  (mean batch {self.mean_batch:.1f}, "
            f"fill {self.batch_fill:.0%})",
            f"raw network evals/s      {self.raw_evaluations_per_s:10.1f}  (same batch, same process)",
            f"ratio                    {self.ratio:10.3f}",
        ]
        if self.gpu_utilisation is not None:
            lines.append(f"GPU utilisation          {self.gpu_utilisation:10.1%}  (NVML, sampled every 0.1 s)")
        elif self.gpu_note:
            lines.append(f"GPU utilisation          -  ({self.gpu_note})")
        if self.workers:
            if self.network_threads is not None:
                tried = ", ".join(f"{t}: {r:.0f}/s" for t, r in (self.thread_rates or {}).items())
                lines.insert(5, f"raw, every core           {self.raw_every_core_per_s:10.1f}  (the server ran with "
                                f"{self.network_threads} thread(s); tuning: {tried or '-'})")
            lines.append(f"network busy             {self.network_busy:10.1%}  (server's time inside the network)")
            wt = self.worker_time
            assert wt is not None  # measured with the workers
            lines.append(f"search workers' time     waiting for the network {wt['network_wait']:.0%}, chess rules "
                         f"{wt['rules']:.0%}, tree {wt['tree']:.0%}, encoding {wt['encode']:.0%}; "
                         f"{self.cpu_us_per_simulation_outside_network:.0f} us per simulation outside the wait")
            if self.cpu_server is not None:
                lines.append(f"CPU cores used           server {self.cpu_server:.2f}, workers "
                             + " ".join(f"{c:.2f}" for c in self.cpu_workers or []))
        if self.share_network is None:
            return "\n".join(lines)
        assert self.shard_io_s is not None  # measured with the shares (single-process)
        lines += [
            f"CPU us/sim outside net   {self.cpu_us_per_simulation_outside_network:10.1f}",
            f"time split               network {self.share_network:.1%}, chess rules {self.share_rules:.1%}, "
            f"tree {self.share_tree:.1%}, encoding {self.share_encoding:.1%}",
            f"shard IO                 {self.shard_io_s * 1000:.1f} ms, {self.bytes_per_position:.1f} bytes/position",
        ]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return asdict(self)


class GpuUtilisation:
    """Mean GPU utilisation over a window: NVML's figure (``torch.cuda.utilization``, which needs the
    ``nvidia-ml-py`` package) sampled every ``every_s`` on a thread. Nothing is sampled off CUDA; ``read`` may
    be given instead (tests)."""

    def __init__(self, device: str, every_s: float = 0.1, read: Callable[[], float] | None = None) -> None:
        self.every_s, self.note = every_s, ""
        self.samples: list[float] = []
        self._read = read
        if read is None and device.startswith("cuda"):
            import torch

            self._read = lambda: float(torch.cuda.utilization(torch.device(device)))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "GpuUtilisation":
        if self._read is not None:
            try:
                self.samples.append(self._read())
            except Exception as exc:  # noqa: BLE001 - no NVML: the benchmark goes on without the figure
                self.note = f"GPU utilisation not read ({type(exc).__name__}: {str(exc).splitlines()[0][:80]}); " \
                            f"pip install nvidia-ml-py"
                return self
            self._thread = threading.Thread(target=self._sample, name="azhpc-gpu-util", daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        read = self._read
        assert read is not None  # __enter__ starts this thread only with a reader
        while not self._stop.wait(self.every_s):
            self.samples.append(read())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) / 100.0 if self.samples and not self.note else None


def raw_network_rate(evaluator, history: int, batch: int, seconds: float = 3.0) -> float:
    """Evaluations per second of ``evaluator`` alone on random planes of ``batch`` positions."""
    rng = np.random.default_rng(0)
    planes = (rng.random((batch, num_planes(history, getattr(evaluator, "attack_planes", False)), 8, 8)) < 0.1).astype(np.float32)
    evaluator.evaluate(planes)  # warm-up
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        evaluator.evaluate(planes)
        n += batch
    return n / (time.perf_counter() - t0)


def bench_selfplay(cfg: Config, config_name: str, device: str = "auto", seconds: float = 30.0,
                   warmup_s: float = 3.0, evaluator=None, workers: int = 0) -> SelfPlayBench:
    """``workers`` 0 measures the single-process engine, more the search pool (``selfplay.pool``)."""
    from ..net.inference import TorchEvaluator, pick_device
    from ..net.model import build_model
    from ..selfplay.output import records_to_arrays
    from ..store.shards import write_shard

    dev = pick_device(device)
    if evaluator is None:
        evaluator = TorchEvaluator(build_model(cfg.model, seed=cfg.run.seed), dev, cfg.mcts.precision,
                                    cfg.mcts.channels_last)
    if workers:
        return _bench_pool(cfg, config_name, str(dev), evaluator, workers, seconds, warmup_s)
    warn_pipeline_on_cpu(cfg.selfplay.pipeline, evaluator)
    engine = SelfPlayEngine(evaluator, cfg)
    engine.start(GameSpec(shard=0, index=i, seed=i) for i in range(10**9))
    stats = engine.search.stats
    # Warm up (first batches, allocations), then measure a window of whole rounds.
    t_start = time.perf_counter()
    while time.perf_counter() - t_start < warmup_s:
        engine.step()
    mean_warm = stats.evaluations / max(stats.batches, 1)
    # The raw rate is taken before and after the window and averaged: shared machines drift.
    raw_before = raw_network_rate(evaluator, cfg.model.history, max(1, int(round(mean_warm))))
    records = []
    s0 = asdict(stats)
    pos0 = engine.positions_recorded
    t0 = time.perf_counter()
    with GpuUtilisation(str(dev)) as gpu:
        while time.perf_counter() - t0 < seconds:
            records.extend(engine.step())
    elapsed = time.perf_counter() - t0
    engine.close()
    d = {k: v - s0[k] for k, v in asdict(stats).items()}
    positions = engine.positions_recorded - pos0
    records.extend(engine.snapshot())
    mean_batch = d["evaluations"] / max(d["batches"], 1)
    raw = 0.5 * (raw_before + raw_network_rate(evaluator, cfg.model.history, max(1, int(round(mean_batch)))))
    measured = d["t_network"] + d["t_rules"] + d["t_tree"] + d["t_encode"]
    # Python work of the search thread (selection, chess rules, encoding, backup), measured directly:
    # with the pipeline it runs while the network computes, so elapsed - network would undercount it.
    outside = d["t_rules"] + d["t_tree"] + d["t_encode"]
    io_s, bpp = 0.0, 0.0
    if records:
        arrays = records_to_arrays(records, games_per_shard=len(records))
        with tempfile.TemporaryDirectory() as tmp:
            t_io = time.perf_counter()
            size = write_shard(Path(tmp) / "bench.h5", arrays, {}, cfg.selfplay.shard_compression)
            io_s = time.perf_counter() - t_io
        bpp = size / max(len(arrays["value_target"]), 1)
    evals_per_s = d["evaluations"] / elapsed
    return SelfPlayBench(
        config=config_name, device=str(dev), games_in_flight=cfg.selfplay.games_in_flight, workers=0, seconds=elapsed,
        simulations=d["simulations"], simulations_per_s=d["simulations"] / elapsed,
        evaluations=d["evaluations"], evaluations_per_s=evals_per_s,
        positions=positions, positions_per_s=positions / elapsed, mean_batch=mean_batch,
        batch_fill=mean_batch / group_widths(cfg.selfplay.games_in_flight, cfg.selfplay.pipeline)[0],
        raw_evaluations_per_s=raw, ratio=evals_per_s / raw if raw else 0.0,
        cpu_us_per_simulation_outside_network=1e6 * outside / max(d["simulations"], 1),
        share_network=d["t_network"] / max(measured, 1e-9), share_rules=d["t_rules"] / max(measured, 1e-9),
        share_tree=d["t_tree"] / max(measured, 1e-9), share_encoding=d["t_encode"] / max(measured, 1e-9),
        shard_io_s=io_s, bytes_per_position=bpp, gpu_utilisation=gpu.mean, gpu_note=gpu.note,
    )


@dataclass
class SelfPlayComparison:
    """``azhpc bench selfplay`` with several arms (worker counts or values of one config key): every run of every
    arm, measured alternately ``repeat`` times so that a shared machine's drift hits every arm alike, and each
    arm's median run. Ratios are against the first arm."""

    runs: dict[str, list[SelfPlayBench]]  # arm name -> its runs, in order
    named_by: str  # "workers" or the varied key

    @property
    def medians(self) -> dict[str, SelfPlayBench]:
        return {a: sorted(r, key=lambda b: b.simulations_per_s)[(len(r) - 1) // 2] for a, r in self.runs.items()}

    @property
    def first(self) -> str:
        return next(iter(self.runs))

    def speedup(self) -> dict[str, float]:
        m = self.medians
        return {a: r.simulations_per_s / m[self.first].simulations_per_s for a, r in m.items()}

    def median_cpu(self, arm: str) -> float | None:
        """The median of the arm's own CPU per simulation outside the network (not the median run's)."""
        cpu = [r.cpu_us_per_simulation_outside_network for r in self.runs[arm]]
        known = [c for c in cpu if c is not None]
        return None if len(known) < len(cpu) else statistics.median_low(known)

    def to_json(self) -> dict:
        m, first, repeat = self.medians, self.first, len(self.runs[self.first])
        if len(m) == 1 and repeat == 1:
            return m[first].to_dict()
        out: dict = {"medians": [r.to_dict() for r in m.values()],
                     f"simulations_per_s_over_{first.replace(' ', '_')}": self.speedup(),
                     "simulations_per_s_every_run": {a: [r.simulations_per_s for r in rs] for a, rs in self.runs.items()},
                     "cpu_us_per_simulation_outside_network_every_run":
                         {a: [r.cpu_us_per_simulation_outside_network for r in rs] for a, rs in self.runs.items()}}
        if self.named_by == "workers":  # the names scripts already read
            out[f"simulations_per_s_over_workers_{m[first].workers}"] = {str(r.workers): self.speedup()[a] for a, r in m.items()}
            out["simulations_per_s_every_run"] = {str(rs[0].workers): [r.simulations_per_s for r in rs] for rs in self.runs.values()}
        return out

    def render(self) -> str:
        m, first = self.medians, self.first
        varied = self.named_by != "workers"
        lines = ["\n\n".join((f"[{a}]\n" if varied else "") + r.render() for a, r in m.items())]
        if len(self.runs[first]) > 1:
            lines.append("")
            for a, rs in self.runs.items():
                cpu = [r.cpu_us_per_simulation_outside_network for r in rs]
                lines.append(f"{a}, every run: simulations/s " + ", ".join(f"{r.simulations_per_s:.0f}" for r in rs)
                             + ("; CPU us/sim outside net " + ", ".join(f"{c:.1f}" for c in cpu) if None not in cpu else ""))
        if len(m) > 1:
            lines.append("")
            for a in list(m)[1:]:
                line = f"simulations/s with {a} / with {first}: {self.speedup()[a]:.2f}x"
                c0, c1 = self.median_cpu(first), self.median_cpu(a)
                if c0 and c1:
                    line += f"; CPU us/sim outside net {c1 / c0:.2f}x (medians {c1:.1f} / {c0:.1f})"
                lines.append(line)
        return "\n".join(lines)


def compare_selfplay(arms: list[tuple[str, int, Config]], config_name: str, device: str, seconds: float, repeat: int,
                     named_by: str, evaluator=None) -> SelfPlayComparison:
    """Every arm (name, search workers, config) measured ``repeat`` times, alternating."""
    runs: dict[str, list[SelfPlayBench]] = {a: [] for a, _, _ in arms}
    for _ in range(repeat):
        for a, k, cfg in arms:
            runs[a].append(bench_selfplay(cfg, config_name, device, seconds, workers=k, evaluator=evaluator))
    return SelfPlayComparison(runs, named_by)


def measure_pool(pool, seconds: float, warmup_s: float, during=None) -> dict:  # noqa: ANN001 - a SearchPool
    """Endless games (a ``bench=True`` pool) for ``warmup_s``, until every worker has searched (at most 2 minutes
    more) and until the network's CPU threads are tuned, then a measured window of ``seconds`` (inside the context
    manager ``during``, if given): counts, network time, the workers' time split and each process's CPU time."""
    from ..cluster import procs
    from ..selfplay.transport import TIME_SPLIT, SlotCounter

    pool.start()
    try:
        pool.serve_for(warmup_s)
        began = time.perf_counter()  # spawned workers import their modules first: seconds on a loaded machine
        while any(s.counters[SlotCounter.SIMULATIONS] == 0 for s in pool.slots) and time.perf_counter() - began < 120:
            pool.serve_for(0.2)
        while pool.threads.tuning:
            pool.serve_for(0.2)
        pids = [os.getpid()] + [w.pid for w in pool.workers]
        c0, s0, cpu0, t0 = pool.counters(), dict(vars(pool.stats)), procs.cpu_seconds(pids), time.perf_counter()
        with during if during is not None else nullcontext():
            pool.serve_for(seconds)
        c1, s1, cpu1 = pool.counters(), dict(vars(pool.stats)), procs.cpu_seconds(pids)
        elapsed = time.perf_counter() - t0
    finally:
        pool.shutdown()
    cpu = [(b - a) / elapsed for a, b in zip(cpu0, cpu1)] if cpu0 and cpu1 else []
    spent = {name: (c1[i] - c0[i]) / (elapsed * pool.k) for name, i in TIME_SPLIT.items()}
    return {"seconds": elapsed, "simulations": int(c1[SlotCounter.SIMULATIONS] - c0[SlotCounter.SIMULATIONS]),
            "positions": int(c1[SlotCounter.POSITIONS] - c0[SlotCounter.POSITIONS]),
            "worker_time": spent,  # share of the workers' wall time
            "evaluations": s1["evaluations"] - s0["evaluations"], "batches": s1["batches"] - s0["batches"],
            "network_busy": (s1["t_network"] - s0["t_network"]) / elapsed, "most_rows": pool.most_rows,
            "cpu_server": cpu[0] if cpu else None, "cpu_workers": cpu[1:] or None,
            "threads": pool.threads.chosen, "thread_rates": dict(pool.threads.rates),
            "torch_in_workers": any(w.torch_imported for w in pool.workers)}


def _bench_pool(cfg: Config, config_name: str, device: str, evaluator, workers: int, seconds: float,
                warmup_s: float) -> SelfPlayBench:
    """The search pool: ``workers`` spawned search processes, this process serving the network."""
    from ..store.paths import RunPaths
    from ..selfplay.pool import SearchPool

    with tempfile.TemporaryDirectory() as tmp:
        pool = SearchPool(evaluator, cfg, RunPaths(Path(tmp)), 0, 0, {}, workers, bench=True)
        gpu = GpuUtilisation(device)
        r = measure_pool(pool, seconds, warmup_s, during=gpu)
    if r["torch_in_workers"]:
        print("warning: torch was imported in a search worker (it must never touch CUDA)")
    mean_batch = r["evaluations"] / max(r["batches"], 1)
    batch = max(1, int(round(mean_batch)))
    raw_all = raw = raw_network_rate(evaluator, cfg.model.history, batch)
    before = network_cpu_threads(evaluator)
    if r["threads"] is not None and r["threads"] != before:
        evaluator.set_threads(r["threads"])  # like for like: the thread count the server ran with
        raw = raw_network_rate(evaluator, cfg.model.history, batch)
        evaluator.set_threads(before)
    elapsed = r["seconds"]
    evals_per_s = r["evaluations"] / elapsed
    return SelfPlayBench(
        config=config_name, device=device, games_in_flight=cfg.selfplay.games_in_flight, workers=workers,
        seconds=elapsed, simulations=r["simulations"], simulations_per_s=r["simulations"] / elapsed,
        evaluations=r["evaluations"], evaluations_per_s=evals_per_s, positions=r["positions"],
        positions_per_s=r["positions"] / elapsed, mean_batch=mean_batch, batch_fill=mean_batch / r["most_rows"],
        raw_evaluations_per_s=raw, ratio=evals_per_s / raw if raw else 0.0, share_network=None, share_rules=None, share_tree=None,
        share_encoding=None, shard_io_s=None, bytes_per_position=None,
        network_threads=r["threads"], thread_rates=r["thread_rates"] or None, raw_every_core_per_s=raw_all,
        network_busy=r["network_busy"], cpu_server=r["cpu_server"], cpu_workers=r["cpu_workers"],
        worker_time=r["worker_time"], gpu_utilisation=gpu.mean, gpu_note=gpu.note,
        cpu_us_per_simulation_outside_network=1e6 * elapsed * workers * (1 - r["worker_time"]["network_wait"])
        / max(r["simulations"], 1),
    )


def bench_shards(cfg: Config, games: int = 64) -> list[dict]:
    """Bytes per position and whole-shard read speed of one shard of ``games`` games per compression.

    The games are played with a uniform evaluator (no network needed); search settings come from ``cfg``.
    """
    from ..search.fakes import UniformEvaluator
    from ..selfplay.output import records_to_arrays
    from ..store.shards import read_shard, write_shard

    engine = SelfPlayEngine(UniformEvaluator(cfg.model.history, cfg.model.attack_sets), cfg)
    records = list(engine.play(GameSpec(shard=0, index=i, seed=i) for i in range(games)))
    arrays = records_to_arrays(records, games_per_shard=games)
    rows = len(arrays["value_target"])
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for compression in ("gzip", "lzf", "none"):
            path = Path(tmp) / f"{compression}.h5"
            t0 = time.perf_counter()
            size = write_shard(path, arrays, {}, compression)
            t1 = time.perf_counter()
            read_shard(path)
            t2 = time.perf_counter()
            out.append({"compression": compression, "rows": rows, "history": cfg.model.history, "bytes": size,
                        "bytes_per_position": size / rows, "write_positions_per_s": rows / (t1 - t0),
                        "read_positions_per_s": rows / (t2 - t1),
                        "policy_entries_per_position": len(arrays["policy_index"]) / rows})
    return out


def bench_train(cfg: Config, workers: int = 2, steps: int = 60, games: int = 24) -> dict:
    """Trainer samples/s on in-memory batches, the data loader's samples/s alone, and the share of step time a
    real training run (``Trainer``, one rank) waits for data, all in one process on the config's network."""
    import dataclasses

    import torch
    from ..train.data import BatchPlan, make_loader, replay_window
    from ..search.fakes import UniformEvaluator
    from ..net.model import build_model
    from ..store.paths import RunPaths
    from ..net.cputhreads import StepThreads
    from ..train.trainer import DistEnv, Trainer, alphazero_loss, amp_dtype
    from ..selfplay.task import run_selfplay_task

    with tempfile.TemporaryDirectory() as tmp:
        paths = RunPaths(Path(tmp))
        sp = dataclasses.replace(cfg.selfplay, games_per_generation=games, games_per_shard=max(1, games // 6), max_plies=120)
        quick = dataclasses.replace(cfg, selfplay=sp, mcts=dataclasses.replace(cfg.mcts, simulations=8, fast_simulations=2))
        paths.config.parent.mkdir(parents=True, exist_ok=True)
        paths.config.write_text(quick.to_yaml())
        run_selfplay_task(paths.root, 0, 0, 1, evaluator=UniformEvaluator(cfg.model.history, cfg.model.attack_sets))
        window = replay_window(paths, 0, 1)
        rows = sum(r.rows for r in window)
        b = cfg.train.batch_size
        plan = BatchPlan(window, b, seed=(0,))
        # Loader alone.
        loader = iter(make_loader(plan, 0, workers, attacks=cfg.model.attack_sets))
        next(loader)  # worker start-up is not throughput
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < 10 and n < 4 * steps:
            next(loader)
            n += 1
        loader_rate = n * b / (time.perf_counter() - t0)
        del loader
        # Trainer compute alone, on one in-memory batch, on the device and in the precision the trainer uses (not
        # its channels_last, torch.compile or fp16 grad scaler: the real run below has those)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        amp = amp_dtype(cfg.train.amp, device)
        batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v
                 for k, v in next(iter(make_loader(plan, 0, 0, attacks=cfg.model.attack_sets))).items()}
        model = build_model(cfg.model, seed=0).train().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

        def step() -> None:
            with torch.autocast(device.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
                logits, value = model(batch["planes"])
                policy_loss, value_loss, _ = alphazero_loss(logits, value, batch["policy"], batch["wdl"])
            opt.zero_grad()
            (policy_loss + value_loss).backward()
            opt.step()

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize()

        # At the thread count the real run's trainer chooses (StepThreads), not torch's default of every core: with
        # another process busy, OpenMP threads spinning at barriers make a step several times slower
        # (docs/performance.md), which the real run below avoids and this figure then did not.
        given = torch.get_num_threads()
        try:
            threads = StepThreads(device.type == "cpu", log=lambda line: None)
            step()  # the first step allocates (and starts CUDA): not measured
            sync()
            while threads.tuning:  # the trials, then the kept count stays for the measured steps
                threads.before_step()
                t = time.perf_counter()
                step()
                threads.after_step(time.perf_counter() - t)
            t0 = time.perf_counter()
            k = 0
            while time.perf_counter() - t0 < 10 and k < steps:
                step()
                k += 1
            sync()
            train_rate = k * b / (time.perf_counter() - t0)
            train_threads = torch.get_num_threads()
        finally:
            torch.set_num_threads(given)  # the real run tunes its own count from the same start
        # A real run: the trainer with its loader; the first steps (worker start-up) are left out.
        tcfg = dataclasses.replace(quick.train, replay_ratio=steps * b / rows, checkpoint_every=10**6, loader_workers=workers)
        paths.config.write_text(dataclasses.replace(quick, train=tcfg).to_yaml())
        try:
            Trainer(paths.root, 0, DistEnv()).run()
        finally:
            torch.set_num_threads(given)  # the caller's count, whatever the trainer chose
        metrics = [json.loads(x) for x in (paths.train_metrics(1)).read_text().splitlines()][5:]
        wait = float(np.mean([m["data_wait_share"] for m in metrics]))
        real_rate = float(np.median([m["samples_per_s"] for m in metrics]))
    return {"batch_size": b, "positions": rows, "loader_workers": workers, "device": str(device),
            "amp": str(amp).replace("torch.", "") if amp else "off", "trainer_samples_per_s": train_rate,
            "trainer_threads": train_threads,
            "loader_samples_per_s": loader_rate, "loader_over_trainer": loader_rate / train_rate,
            "real_run_samples_per_s": real_rate, "real_run_data_wait_share": wait}
