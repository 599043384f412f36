"""How many CPU threads the search pool's network gets, when it runs on the CPU.

On a CPU-only machine the server's network and the ``K`` search workers share the cores. Which split is best
depends on the network: a tiny net costs about what the search costs per position, and torch's idle OpenMP
threads spin on the cores the workers need (with two threads the server took 1.4 of 2 cores and the workers
got 0.3 each), so one thread is best; a large net is the bottleneck and wants every core. No fixed rule gets
both right, so the server measures: it runs the network for a short window at each candidate thread count,
keeps the one that evaluated the most positions per second and says so in one line. On a GPU nothing is
tuned (the network's threads only launch kernels), and ``AZHPC_TORCH_THREADS=N`` fixes the count.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def fixed_threads() -> int | None:
    """The thread count ``AZHPC_TORCH_THREADS`` fixes (at least 1), or None when it is unset."""
    value = os.environ.get("AZHPC_TORCH_THREADS", "")
    return max(1, int(value)) if value.isdigit() else None


def network_cpu_threads(evaluator: Any) -> int | None:
    """Torch's thread count for an evaluator whose network runs on the CPU; None on a GPU or for a fake."""
    get = getattr(evaluator, "cpu_threads", None)
    return get() if get is not None else None


def warn_pipeline_on_cpu(pipeline: bool, evaluator: Any) -> None:
    """One line when a single process runs the pipeline with its network on the CPU: the pipeline's helper
    thread then fights torch's threads for the cores (docs/performance.md)."""
    if pipeline and network_cpu_threads(evaluator) is not None:
        print("azhpc: selfplay.pipeline is on but the network runs on the CPU in this process: its helper thread "
              "competes with torch's for the cores (3x slower on the tiny config, docs/performance.md); set "
              "selfplay.pipeline=false or use selfplay.search_workers", file=sys.stderr, flush=True)


def thread_choices(cpus: int, workers: int) -> list[int]:
    """One thread (the workers keep their cores), the cores the workers leave, and every core."""
    return sorted({1, max(1, cpus - workers), max(1, cpus)})


class ThreadTuner:
    """Tries each candidate thread count for ``window_s`` of serving, then keeps the fastest.

    The window is cut into ``rounds`` slices that visit the candidates in turn (1, 2, 1, 2, ...), so that a
    shared machine's drift hits every candidate alike. ``tick(evaluations, busy)`` is called after every
    network batch with the server's running count of evaluated positions and whether every search worker had
    all its games in flight: a slice in which they did not (a worker starting or restarting, games running
    out) starts again, so a rate measures the thread count, not a lull in the work. Nothing happens for an
    evaluator that is not a CPU torch network (no ``set_threads``).
    """

    def __init__(self, evaluator: Any, workers: int, window_s: float = 2.0, rounds: int = 3, log: Any = None) -> None:
        self.window_s, self.workers = window_s, workers
        self.log = log if log is not None else sys.stderr
        self._set = getattr(evaluator, "set_threads", None)
        self.before: int | None = network_cpu_threads(evaluator) if self._set else None
        self.choices: list[int] = []
        if self.before is not None and fixed_threads() is None:
            self.choices = thread_choices(len(os.sched_getaffinity(0)), workers)
        self.rates: dict[int, float] = {}
        self.chosen: int | None = None if len(self.choices) > 1 else (self.choices[0] if self.choices else None)
        if self.chosen is not None:
            self._apply(self.chosen)
        self._order = self.choices * rounds if self.chosen is None else []
        self._slice_s = window_s / max(1, rounds)
        self._done = {t: [0, 0.0] for t in self.choices}  # evaluations, seconds
        self._trial = -1
        self._t0 = 0.0
        self._e0 = 0

    def _apply(self, threads: int) -> None:
        assert self._set is not None  # choices, chosen and before exist only where the evaluator has set_threads
        self._set(threads)

    @property
    def tuning(self) -> bool:
        return self.chosen is None and len(self.choices) > 1

    def tick(self, evaluations: int, busy: bool = True) -> None:
        if not self.tuning:
            return
        now = time.perf_counter()
        if self._trial >= 0:
            if not busy:
                self._t0, self._e0 = now, evaluations
                return
            if now - self._t0 < self._slice_s:
                return
            done = self._done[self._order[self._trial]]
            done[0] += evaluations - self._e0
            done[1] += now - self._t0
        elif not busy:
            return
        self._trial += 1
        if self._trial < len(self._order):
            self._apply(self._order[self._trial])
            self._t0, self._e0 = time.perf_counter(), evaluations
            return
        self.rates = {t: e / s for t, (e, s) in self._done.items()}
        self.chosen = max(self.rates, key=lambda t: self.rates[t])
        self._apply(self.chosen)
        tried = ", ".join(f"{t} thread{'s' if t > 1 else ''} {r:,.0f}/s" for t, r in self.rates.items())
        print(f"azhpc: network on the CPU beside {self.workers} search worker(s): evaluations with {tried}; "
              f"using {self.chosen} (AZHPC_TORCH_THREADS=N fixes it)", file=self.log, flush=True)

    def restore(self) -> None:
        """Give torch back the thread count it had (the benchmark measures several pools in one process). A task
        whose work ended before the measurement did says so."""
        if self.tuning:
            now = self._order[self._trial] if self._trial >= 0 else self.before
            print(f"azhpc: network on the CPU beside {self.workers} search worker(s): the work ended before the thread "
                  f"count was measured (that takes ~{self.window_s * len(self.choices):.0f} s with every worker's games "
                  f"in flight); served with {now}", file=self.log, flush=True)
        if self.before is not None:
            self._apply(self.before)


class StepThreads:
    """Torch's thread count for training on the CPU, measured on the training steps themselves.

    With more threads than free cores, torch's OpenMP threads spin at every barrier while a peer waits to be
    scheduled: on a 2-core machine with another process busy, a 2x32 training step took 668 ms of wall time (453 ms
    of CPU) with two threads and 44 ms (30 ms) with one; on a quiet machine two threads are faster
    (docs/performance.md). So the trainer times its steps with one thread and with the count it was given, in
    turn (``trials`` each; a first pair that differs by more than ``clear`` decides at once), keeps the faster and
    says so in one line. The median of the next ``window`` steps at the kept count is its reference; when a later
    window's median drifts from it by more than ``drift`` (a process arrived or left), it measures again. A
    measurement that keeps the same count doubles the window of the next reference and drift check (up to
    ``max_window`` steps, and a window also ends once its steps add up to ``max_window_s`` seconds, so that a load
    arriving later is still found within about a minute) and prints nothing: step times that move with the batch
    mix, not the load (a rating's batches are 1 to 64 positions), had re-measured every few seconds, each time one
    slow step at the other count and one log line. A measurement that changes the count says so and starts again
    from ``window``. ``before_step`` sets the count for the coming step and ``after_step(seconds)`` takes its
    compute time. Nothing is tuned on a GPU, with one thread given, or with ``AZHPC_TORCH_THREADS`` set (which
    fixes the count). Thread counts change the rounding of reductions, so a tuned run is not bitwise reproducible
    (a fixed count is).
    """

    def __init__(self, cpu: bool, log: Any = None, trials: int = 2, clear: float = 3.0, drift: float = 1.5,
                 window: int = 16, max_window: int = 1024, max_window_s: float = 30.0,
                 what: str = "training on the CPU", unit: str = "a step") -> None:
        import torch

        self._torch = torch
        self.log = log if log is not None else (lambda line: print(line, file=sys.stderr, flush=True))
        self.trials, self.clear, self.drift, self.window = trials, clear, drift, window
        self.max_window, self.max_window_s = max(window, max_window), max_window_s
        self._span = window  # steps per drift check: doubles each time a measurement keeps the count
        self.measurements = 0  # trial rounds after the first (drift checks that measured again)
        self.what, self.unit = what, unit  # the log line: "<what>: <unit> took 1 thread .. ms, ..."
        fixed = fixed_threads() if cpu else None
        if fixed is not None:
            torch.set_num_threads(fixed)
        given = torch.get_num_threads()
        self.choices = [1, given] if cpu and fixed is None and given > 1 else []
        self.chosen: int | None = None if self.choices else given
        self.times: dict[int, list[float]] = {}
        self._plan: list[int] = []
        self._current = given
        self._reference = 0.0
        self._recent: list[float] = []
        self._recent_s = 0.0  # the seconds of the steps in _recent
        self._warm = bool(self.choices)  # the first step allocates: not measured
        if self.choices:
            self._start_trials()

    @property
    def tuning(self) -> bool:
        """True while steps are still trials (the warm step included): their times are not the kept count's."""
        return self._warm or bool(self._plan)

    def _start_trials(self) -> None:
        self.times = {t: [] for t in self.choices}
        self._plan = self.choices * self.trials

    def _set(self, threads: int) -> None:
        if threads != self._current:
            self._torch.set_num_threads(threads)
            self._current = threads

    def before_step(self) -> None:
        if self._plan and not self._warm:
            self._set(self._plan[0])

    def after_step(self, seconds: float) -> None:
        if not self.choices:
            return
        if self._warm:
            self._warm = False
            return
        if self._plan:
            self.times[self._plan.pop(0)].append(seconds)
            firsts = [v[0] for v in self.times.values() if v]
            if len(firsts) == len(self.choices) and max(firsts) > self.clear * min(firsts):
                self._plan = []  # one pair is clear enough: fewer steps at the slow count
            if not self._plan:
                self._decide()
            return
        self._recent.append(seconds)
        self._recent_s += seconds
        steps = len(self._recent)
        full = steps >= self._span or (steps >= self.window and self._recent_s >= self.max_window_s)
        if not full:
            return
        now = sorted(self._recent)[steps // 2]
        self._recent, self._recent_s = [], 0.0
        if not self._reference:  # the first window after a decision is the reference (a trial step is one sample)
            self._reference = now
        elif now > self.drift * self._reference or now * self.drift < self._reference:
            self._start_trials()

    def _decide(self) -> None:
        medians = {t: sorted(v)[len(v) // 2] for t, v in self.times.items() if v}
        before = self.chosen
        self.chosen = min(medians, key=lambda t: medians[t])
        self._reference, self._recent, self._recent_s = 0.0, [], 0.0
        self._set(self.chosen)
        if before is not None:
            self.measurements += 1
            if self.chosen == before:  # the drift was not the load's: look less often, quietly
                self._span = min(2 * self._span, self.max_window)
                return
            self._span = self.window
        tried = ", ".join(f"{t} thread{'s' if t > 1 else ''} {1000 * m:.0f} ms" for t, m in medians.items())
        what = "measured again" if before is not None else self.what
        self.log(f"{what}: {self.unit} took {tried}; using {self.chosen} (AZHPC_TORCH_THREADS=N fixes it)")
