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
            self._set(self.chosen)
        self._order = self.choices * rounds if self.chosen is None else []
        self._slice_s = window_s / max(1, rounds)
        self._done = {t: [0, 0.0] for t in self.choices}  # evaluations, seconds
        self._trial = -1
        self._t0 = 0.0
        self._e0 = 0

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
            self._set(self._order[self._trial])
            self._t0, self._e0 = time.perf_counter(), evaluations
            return
        self.rates = {t: e / s for t, (e, s) in self._done.items()}
        self.chosen = max(self.rates, key=lambda t: self.rates[t])
        self._set(self.chosen)
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
            self._set(self.before)
