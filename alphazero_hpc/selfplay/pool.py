"""Several search processes per self-play task, sharing one network in the task's own process.

One Python search loop costs ~26 us of CPU per simulation outside the network (docs/performance.md), so one
process cannot keep a GPU busy. Here the
task's process owns the network (and the CUDA context) and serves it; ``K`` search workers, started with
``spawn`` and never importing torch, each run the batched MCTS over their own games (``SelfPlayEngine``).

Transport (``selfplay.transport``): each worker has a *slot* of shared memory; a request is 8 bytes on the
worker's evaluation pipe, the answer the same 8 bytes back; no array is ever pickled. The server waits for requests with ``multiprocessing.connection.wait`` on every pipe and every
worker's process sentinel, so a dead worker is seen at once and never waited on. Whenever the network is
free it runs one batch over the rows of the workers that have asked, in the order they asked, up to
``server_max_batch`` rows; ``server_max_wait_ms`` > 0 holds a partial batch until every live worker has asked
or that long has passed.

Shards: workers ask the server for a shard to play (the server paces them against the job's deadline), play
its games, and write the shard, its PGN sample and its sidecar themselves, exactly as the single-process
engine does, so writing never stalls the network. The server turns their small control messages (typed
records: ``GameDone``, ``ShardDone``, ...) into the task's progress file. A worker that dies is reported; its unfinished
shards go back to the queue and a new worker takes its place, up to ``search_worker_restarts`` times. A
worker that raises reports its error and the task fails with it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..config import Config
from ..net.cputhreads import ThreadTuner
from ..game.encoding import num_planes
from ..errors import AzhpcError, failure_line
from ..search.evaluator import Evaluator
from ..store import atomic
from ..store.paths import RunPaths
from ..cluster.preempt import Stop, ignore_stop_signals
from .engine import SelfPlayEngine, group_widths
from .output import write_complete_shard
from .transport import (REQUEST, Died, GameDone, Hello, Message, NextShard, RemoteEvaluator, ShardDone, Slot, SlotCounter,
                        WorkerExit, WorkerFailed, drain)
from .plan import GameSpec, game_specs, plan_task

@dataclass(frozen=True)
class WorkerArgs:
    index: int
    cfg: Config
    run_dir: str
    generation: int
    task: int
    num_tasks: int
    attrs: dict
    bench: bool = False  # play endless games, write nothing (``azhpc bench selfplay``)


def _worker_main(args: WorkerArgs, slot: Slot, eval_conn: Connection, ctl: Connection, stop: Any) -> None:
    """A search worker (spawned). SLURM signals every process of the step: only the server reacts to that."""
    ignore_stop_signals()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ctl.send(Hello(os.getpid(), "torch" in sys.modules))
        _search(args, slot, eval_conn, ctl, stop)
        ctl.send(WorkerExit("stopped" if stop.is_set() else "done"))
    except BaseException as exc:  # noqa: BLE001 - reported to the server, which fails the task with it
        try:
            ctl.send(WorkerFailed(failure_line(exc), traceback.format_exc()[-8000:]))
        except (OSError, ValueError):
            pass
        sys.exit(1)


def _search(args: WorkerArgs, slot: Slot, eval_conn: Connection, ctl: Connection, stop: Any) -> None:
    cfg = args.cfg
    paths = RunPaths(Path(args.run_dir))
    plan = plan_task(cfg, args.task, args.num_tasks)
    engine = SelfPlayEngine(RemoteEvaluator(slot, eval_conn, group_widths(cfg.selfplay.games_in_flight, cfg.selfplay.pipeline)), cfg)

    def shards() -> Iterator[GameSpec]:
        if args.bench:
            seed = 10**9 * (args.index + 1)
            while True:
                seed += 1
                yield GameSpec(shard=0, index=0, seed=seed)
        while True:
            ctl.send(NextShard())
            shard = ctl.recv()
            if shard is None:
                return
            yield from game_specs(cfg, args.generation, args.task, plan, [shard])

    pending: dict[int, list] = {}
    engine.start(shards())
    try:
        while engine.busy and not stop.is_set():
            for record in engine.step():
                if args.bench:
                    continue
                shard = record.spec.shard
                pending.setdefault(shard, []).append(record)
                ctl.send(GameDone(shard, engine.search.stats.simulations))
                if len(pending[shard]) == plan.games_in_shard(shard):
                    sidecar = write_complete_shard(paths, cfg, args.generation, args.task, shard, pending.pop(shard), args.attrs)
                    ctl.send(ShardDone(sidecar))
            st = engine.search.stats
            c = slot.counters
            c[SlotCounter.SIMULATIONS], c[SlotCounter.POSITIONS] = st.simulations, engine.positions_recorded
            c[SlotCounter.WAIT_NETWORK], c[SlotCounter.RULES], c[SlotCounter.TREE], c[SlotCounter.ENCODE] = (
                st.t_network, st.t_rules, st.t_tree, st.t_encode)
            c[SlotCounter.IN_FLIGHT] = len(engine.active)
    finally:
        engine.close()


@dataclass
class _Worker:
    index: int
    process: Any
    eval_conn: Connection
    ctl: Connection
    pid: int = 0
    torch_imported: bool = False
    shards: tuple[int, ...] = ()  # handed out, not yet written
    exited: str = ""  # "done", "stopped" once it said so
    error: tuple[str, str] | None = None
    simulations: int = 0


@dataclass
class ServerStats:
    batches: int = 0
    evaluations: int = 0
    restarts: int = 0
    t_network: float = 0.0  # seconds inside the network's evaluate (on a GPU: the copy and kernels, synchronised)


class SearchPool:
    """The server side of one self-play task: spawns the workers, serves the network, keeps progress."""

    def __init__(self, evaluator: Evaluator, cfg: Config, paths: RunPaths, generation: int, task: int,
                 attrs: dict, workers: int, num_tasks: int = 1, bench: bool = False) -> None:
        self.evaluator, self.cfg, self.paths = evaluator, cfg, paths
        self.generation, self.task, self.k = generation, task, workers
        sp = cfg.selfplay
        self.max_batch = sp.server_max_batch or workers * sp.games_in_flight
        self.most_rows = min(self.max_batch, workers * sp.games_in_flight)  # all the workers can ask for at once
        self.max_wait = sp.server_max_wait_ms / 1000.0
        self.ctx = mp.get_context("spawn")
        self.stop = self.ctx.Event()
        model = cfg.model
        self.slots = [Slot(sp.games_in_flight, model.history, self.ctx, model.attack_sets) for _ in range(workers)]
        self.staging = np.empty((self.max_batch, num_planes(model.history, model.attack_sets), 8, 8), np.float32)
        self.args = [WorkerArgs(i, cfg, str(paths.root), generation, task, num_tasks, attrs, bench) for i in range(workers)]
        self.workers: list[_Worker] = []
        self.stats = ServerStats()
        self.dead_simulations = 0
        self.pending: list[tuple[int, int, int]] = []  # requests in arrival order: worker index, first row, rows
        self.first_request = 0.0
        self.threads: ThreadTuner | None = None

    # -- workers -------------------------------------------------------------------------------------
    def _spawn(self, index: int) -> _Worker:
        eval_here, eval_there = self.ctx.Pipe()
        ctl_here, ctl_there = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker_main, name=f"azhpc-search-{index}", daemon=True,
                             args=(self.args[index], self.slots[index], eval_there, ctl_there, self.stop))
        p.start()
        eval_there.close()
        ctl_there.close()
        self.slots[index].counters[:] = 0
        assert p.pid is not None  # started
        return _Worker(index, p, eval_here, ctl_here, pid=p.pid)

    def start(self) -> None:
        self.threads = ThreadTuner(self.evaluator, self.k)
        self.workers = [self._spawn(i) for i in range(self.k)]

    def live(self) -> list[_Worker]:
        return [w for w in self.workers if w.process is not None]

    def shutdown(self, grace_s: float = 10.0) -> None:
        """Ask the workers to stop, wait ``grace_s`` for them, then kill what is left."""
        self.stop.set()
        t_end = time.monotonic() + grace_s
        for w in self.live():
            while w.process.is_alive() and time.monotonic() < t_end:
                # a worker blocked on the network or on its next shard must get its answer to notice the stop
                for other, msg in self._serve_once(0.05):
                    if isinstance(msg, NextShard):
                        other.ctl.send(None)
        for w in self.live():
            if w.process.is_alive():
                w.process.kill()
            w.process.join(5)
            w.process = None
        if self.threads is not None:
            self.threads.restore()

    # -- serving -------------------------------------------------------------------------------------
    def _serve_once(self, timeout: float) -> list[tuple[_Worker, Any]]:
        """Wait up to ``timeout`` for requests; run a batch when the policy says so. Returns control messages
        (what a worker says about itself, hello, error and exit, is already noted on it)."""
        objs: dict[Any, tuple[str, _Worker]] = {}
        for w in self.live():
            objs[w.eval_conn] = ("eval", w)
            objs[w.ctl] = ("ctl", w)
            objs[w.process.sentinel] = ("exit", w)
        if self.pending:  # rows left over from a full batch go at once; others wait for company, up to max_wait
            timeout = 0.0 if self._batch_ready() else max(0.0, min(timeout, self.first_request + self.max_wait - time.monotonic()))
        messages: list[tuple[_Worker, Message]] = []
        for obj in wait(list(objs), timeout):
            kind, w = objs[obj]
            if w.process is None:
                continue
            if kind == "eval":
                try:
                    while True:  # with the pipeline both halves of a worker may be waiting
                        offset, n = REQUEST.unpack(w.eval_conn.recv_bytes())
                        if not self.pending:
                            self.first_request = time.monotonic()
                        self.pending.append((w.index, offset, n))
                        if not w.eval_conn.poll():
                            break
                except (EOFError, OSError):
                    continue  # the worker is gone; its sentinel says so
            else:  # on its end, what it said before comes first (its error, its last shard)
                messages.extend((w, m) for m in drain(w.ctl))
                if kind == "exit":
                    messages.append((w, Died()))
        for w, msg in messages:  # what a worker says about itself
            if isinstance(msg, Hello):
                w.pid, w.torch_imported = msg.pid, msg.torch_imported
            elif isinstance(msg, WorkerFailed):
                w.error = (msg.error, msg.traceback)
            elif isinstance(msg, WorkerExit):
                w.exited = msg.how
        if self._batch_ready():
            self._run_batch()
        return messages

    def _batch_ready(self) -> bool:
        if not self.pending:
            return False
        asked = sum(n for _, _, n in self.pending)
        waiting = {index for index, _, _ in self.pending}
        everyone = all(w.index in waiting for w in self.live() if not w.exited)
        return everyone or asked >= self.max_batch or time.monotonic() - self.first_request >= self.max_wait

    def _run_batch(self) -> None:
        take, rows = 0, 0
        for _, _, n in self.pending:  # in the order they asked: none waits behind a later one
            if rows + n > self.max_batch and take:
                break
            take, rows = take + 1, rows + n
        taken, self.pending = self.pending[:take], self.pending[take:]
        row = 0
        for index, first, n in taken:
            self.staging[row:row + n] = self.slots[index].planes[first:first + n]
            row += n
        t = time.perf_counter()
        logits, values = self.evaluator.evaluate(self.staging[:rows])
        self.stats.t_network += time.perf_counter() - t
        self.stats.batches += 1
        self.stats.evaluations += rows
        if self.threads is not None and self.threads.tuning:
            self.threads.tick(self.stats.evaluations, busy=self._workers_busy())
        by_index = {w.index: w for w in self.live()}
        row = 0
        for index, first, n in taken:
            slot = self.slots[index]
            slot.logits[first:first + n] = logits[row:row + n]
            slot.values[first:first + n] = values[row:row + n]
            row += n
            w = by_index.get(index)
            if w is not None:
                try:
                    w.eval_conn.send_bytes(REQUEST.pack(first, n))
                except OSError:
                    pass  # died while waiting; its sentinel says so
        if self.pending:
            self.first_request = time.monotonic()

    def _workers_busy(self) -> bool:
        """Every worker is running with all its games in flight (none starting, restarting or out of work)."""
        full = self.cfg.selfplay.games_in_flight
        return all(w.process is not None and not w.exited and self.slots[w.index].counters[SlotCounter.IN_FLIGHT] >= full for w in self.workers)

    def counters(self) -> np.ndarray:
        """Simulations and positions of the workers now running, summed (a replacement starts from zero)."""
        return sum((s.counters.copy() for s in self.slots), np.zeros(len(SlotCounter)))

    # -- a task --------------------------------------------------------------------------------------
    def run(self, missing: list[int], pacer: Any, pf: Any) -> None:
        """Play ``missing`` shards; progress goes to ``pf``. Returns when every worker has stopped."""
        progress = pf.p
        queue = sorted(missing)
        handed_any = False
        last_write = 0.0
        progress.search_workers = self.k
        self.start()
        try:
            while self.live():
                if Stop.reason and not self.stop.is_set():
                    pacer.stopped()
                    self.stop.set()  # in-flight games are dropped, as in the single-process engine
                for w, msg in self._serve_once(0.5):
                    if isinstance(msg, Hello):
                        progress.search_worker_pids = [x.pid for x in self.live()]
                        last_write = 0.0
                    elif isinstance(msg, NextShard):
                        shard = None
                        if queue and not self.stop.is_set() and pacer.may_start(queue[0], first=not handed_any):
                            shard, handed_any = queue.pop(0), True
                            w.shards += (shard,)
                        w.ctl.send(shard)
                    elif isinstance(msg, GameDone):
                        progress.games_done += 1
                        progress.games_this_attempt += 1
                        w.simulations = msg.simulations
                    elif isinstance(msg, ShardDone):
                        w.shards = tuple(s for s in w.shards if s != msg.sidecar.shard)
                        progress.add_shard(msg.sidecar)
                        last_write = 0.0
                    elif isinstance(msg, Died):
                        queue = self._buried(w, queue)
                        progress.search_worker_restarts = self.stats.restarts
                progress.simulations_this_attempt = self.dead_simulations + sum(w.simulations for w in self.live())
                if time.monotonic() - last_write > 1.0:
                    pf.write()
                    last_write = time.monotonic()
        finally:
            self.shutdown()

    def _buried(self, w: _Worker, queue: list[int]) -> list[int]:
        """A worker process ended: a clean exit, an error (the task fails) or a death (restart it)."""
        w.process.join(5)
        code = w.process.exitcode
        w.process = None
        self.dead_simulations += w.simulations
        self.pending = [r for r in self.pending if r[0] != w.index]
        if w.exited and code == 0:
            return queue
        for shard in w.shards:  # a shard being written when it died: drop the writer's temporaries
            for path in (self.paths.shard(self.generation, self.task, shard), self.paths.sidecar(self.generation, self.task, shard),
                         self.paths.pgn(self.generation, self.task, shard)):
                for tmp in atomic.temporaries(path):
                    tmp.unlink(missing_ok=True)
        queue = sorted(set(queue) | set(w.shards) - set(self.paths.complete_shards(self.generation, self.task)))
        how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited with code {code}"
        if w.error is not None:
            raise AzhpcError(f"search worker {w.index} (pid {w.pid}) failed: {w.error[0]}")
        if self.stats.restarts >= self.cfg.selfplay.search_worker_restarts:
            raise AzhpcError(f"search worker {w.index} (pid {w.pid}) {how} while playing shard(s) {list(w.shards)}, "
                             f"after {self.stats.restarts} restart(s): raise selfplay.search_worker_restarts, or look "
                             f"for the cause (out of memory? dmesg) and run the task again")
        self.stats.restarts += 1
        print(f"azhpc: search worker {w.index} (pid {w.pid}) {how} while playing shard(s) {list(w.shards)}; "
              f"restarting it ({self.stats.restarts} of {self.cfg.selfplay.search_worker_restarts})", file=sys.stderr, flush=True)
        self.workers[self.workers.index(w)] = self._spawn(w.index)
        return queue

    def serve_for(self, seconds: float) -> None:
        """Serve the workers for ``seconds`` (a benchmark's endless games: ``bench=True``); a worker that ends is
        an error."""
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            for w, msg in self._serve_once(0.1):
                if isinstance(msg, Died):
                    raise AzhpcError(f"search worker {w.index} (pid {w.pid}) ended during the benchmark: "
                                     f"{w.error[0] if w.error else f'exit code {w.process.exitcode}'}")
