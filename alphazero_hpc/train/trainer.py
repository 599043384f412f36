"""Train generation G's replay window and write ``models/gen-(G+1).pt``; generation -1 is pretraining: the
imported games (``azhpc import-pgn``) from a seeded random network, writing ``models/gen-0000.pt``.

One process (CPU):
    python -m alphazero_hpc.train --run-dir scratch/run --generation 0
One node, 8 GPUs:
    torchrun --standalone --nproc-per-node 8 -m alphazero_hpc.train --run-dir R --generation G
Two nodes (inside a SLURM allocation; rendezvous on the first node):
    srun --nodes 2 --ntasks-per-node 1 torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint "$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1):29500" \\
        --rdzv-id "$SLURM_JOB_ID" -m alphazero_hpc.train --run-dir R --generation G
Or straight under srun, one task per GPU (ranks from SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID):
    srun --nodes 2 --ntasks-per-node 8 python -m alphazero_hpc.train --run-dir R --generation G

Rank 0 alone writes. Killed at any moment and started again with the same arguments, it resumes from the last
training state and finishes the same number of steps; a generation whose checkpoint exists is not retrained.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.distributed as dist
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel

from ..store import atomic
from ..net.checkpoint import ensure_initial_checkpoint, load_model, read_checkpoint, save_checkpoint
from ..net.cputhreads import StepThreads
from ..net.model import AlphaZeroNet, build_model
from ..net.precision import describe as describe_precision, uses_bf16
from ..config import Config
from .data import BatchPlan, ShardRef, imported_window, make_loader, new_positions, replay_window, set_aside_bad_new_shards
from ..errors import AzhpcError, failure_line, report
from ..store.paths import RunPaths
from ..store.progress import TrainOutcome, check_stalled, end_train_slice, start_train_slice
from ..cluster.preempt import EXIT_REQUEUE, Deadline, Stop
from ..cluster.slurmenv import SlurmEnv
from ..store.runconfig import read_run_config

STATE_SCHEMA = 1
REFERENCE_BATCH = 256  # lr in the config is for this global batch; it scales linearly (Goyal et al. 2017)
MAX_NONFINITE_IN_A_ROW = 10


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def master(self) -> bool:
        return self.rank == 0


def dist_env() -> DistEnv:
    """Ranks from torchrun (RANK, WORLD_SIZE, LOCAL_RANK) or srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID)."""
    e = os.environ
    if "RANK" in e and "WORLD_SIZE" in e:
        return DistEnv(int(e["RANK"]), int(e["WORLD_SIZE"]), int(e.get("LOCAL_RANK", 0)))
    slurm = SlurmEnv.now()
    if slurm.in_step and slurm.ntasks > 1:
        if "MASTER_ADDR" not in e:
            e["MASTER_ADDR"] = slurm.first_node
            e["MASTER_PORT"] = str(slurm.rendezvous_port)
        return DistEnv(slurm.procid, slurm.ntasks, slurm.localid)
    return DistEnv()


def alphazero_loss(logits: torch.Tensor, value: torch.Tensor, target_policy: torch.Tensor,
                   target_wdl: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(policy loss, value loss, policy log-probabilities): cross-entropy against the search's policy target
    [B, 4672] and against the win/draw/loss target: a class [B], or a distribution [B, 3]
    (``train.value_target_q_ratio``). Computed in float32."""
    logp = F.log_softmax(logits.float(), dim=1)
    return -(target_policy * logp).sum(1).mean(), F.cross_entropy(value.float(), target_wdl), logp


PRETRAIN = -1  # the "generation" whose training writes models/gen-0000.pt from imported games


def plan_steps(cfg: Config, paths: RunPaths, generation: int) -> int:
    """Steps of a generation: replay_ratio positions trained per new position, at the global batch size;
    pretraining: pretrain.epochs passes over the imported positions (at most pretrain.max_steps)."""
    if generation == PRETRAIN:
        positions = sum(r.rows for r in imported_window(paths))
        if positions == 0:
            raise AzhpcError(f"{paths.root} has no imported positions to pretrain on: run azhpc import-pgn {paths.root} FILE ... first")
        steps = max(1, math.ceil(cfg.pretrain.epochs * positions / cfg.train.batch_size))
        return min(steps, cfg.pretrain.max_steps) if cfg.pretrain.max_steps else steps
    fresh = new_positions(paths, generation)
    if fresh == 0:
        raise AzhpcError(f"generation {generation} has no complete self-play shards in {paths.selfplay(generation)}: run its self-play first")
    return max(1, math.ceil(cfg.train.replay_ratio * fresh / cfg.train.batch_size))


def lr_factor(steps: int, generation: int, schedule: str) -> Callable[[int], float]:
    """The learning rate's factor at each step: a linear warm-up over the first 5% of generation 0's (and
    pretraining's) steps; for pretraining with ``cosine``, then a half cosine down to 1% at the last step."""
    warmup = max(1, steps // 20) if generation <= 0 else 1
    cosine = generation == PRETRAIN and schedule == "cosine"

    def factor(step: int) -> float:
        if step + 1 < warmup or not cosine:
            return min(1.0, (step + 1) / warmup)
        done = min(1.0, (step + 1 - warmup) / max(1, steps - warmup))
        return 0.01 + 0.99 * 0.5 * (1.0 + math.cos(math.pi * done))
    return factor


def amp_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of ``train.amp`` on ``device`` (auto: bf16 on CUDA, none elsewhere; bf16-if-native: bf16
    where the device has bf16 instructions, net/precision.py); None: no autocast."""
    if amp == "fp16":
        return torch.float16
    return torch.bfloat16 if uses_bf16(amp, device) else None


@dataclass
class _Session:
    """What a training run holds between steps: the network and its wrappers, the optimizer, and where it is."""

    model: AlphaZeroNet  # unwrapped: saved and checked
    forward: Callable[..., Any]  # what the batch goes through: DDP and/or torch.compile around ``model``
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    amp_dtype: torch.dtype | None
    memory_format: torch.memory_format
    tb: Any | None  # a TensorBoard SummaryWriter on rank 0, when installed
    step: int  # steps applied
    skipped: int  # steps skipped for a non-finite loss
    consumed: int  # batches taken from the batch plan (the data position a resume starts from)


@dataclass(frozen=True)
class _StepOutput:
    loss: torch.Tensor
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    logp: torch.Tensor  # [B, 4672] policy log-probabilities
    logits: torch.Tensor
    target_p: torch.Tensor
    grad_norm: torch.Tensor
    material_loss: torch.Tensor | None = None  # model.material_head's, unweighted


class Trainer:
    def __init__(self, run_dir: Path, generation: int, env: DistEnv, workers: int | None = None, device: str = "auto",
                 deadline: Deadline | None = None) -> None:
        self.paths = RunPaths(run_dir)
        self.cfg = read_run_config(self.paths)
        self.generation = generation
        self.env = env
        tc = self.cfg.train
        self.workers = tc.loader_workers if workers is None else workers
        if tc.batch_size % env.world:
            raise AzhpcError(f"train.batch_size {tc.batch_size} does not split over {env.world} ranks: make it a multiple of the world size")
        self.local_batch = tc.batch_size // env.world
        if device == "auto":
            device = f"cuda:{env.local_rank}" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.out = self.paths.model(generation + 1)
        self.state_path = self.paths.train_state(generation + 1)
        self.metrics_path = self.paths.train_metrics(generation + 1)
        self.lr = tc.lr * tc.batch_size / REFERENCE_BATCH * tc.lr_decay ** max(0, generation)
        self.deadline = deadline or Deadline(None)
        self.margin_s = float(self.cfg.slurm.stop_margin_s)
        self._step_s = 0.0  # slowest recent step, seconds
        self._save_s = 0.0  # last state save, seconds

    def _stop_reason(self, steps_this_attempt: int) -> str:
        """Why to stop now ('' to go on): a stop signal, or too little time left for a step and a save."""
        if Stop.reason:
            return Stop.reason
        need = self.margin_s + 2 * self._step_s + 2 * self._save_s
        if steps_this_attempt and self.deadline.remaining() < need:
            return f"time limit: {self.deadline.remaining():.0f} s left (slurm.stop_margin_s {self.margin_s:.0f} s)"
        return ""

    def log(self, msg: str) -> None:
        if self.env.master:
            what = "pretrain" if self.generation == PRETRAIN else f"gen {self.generation}"
            print(f"[train {what}->{self.generation + 1}] {msg}", flush=True)

    def run(self) -> TrainOutcome:
        """Train the planned steps from the last training state (if any) and write the next network. The outcome
        is done (written now, or before: its message says which) or stopped (state saved; run again to go on)."""
        if self.out.exists():
            self.log(f"{self.out} exists: generation already trained, nothing to do")
            return TrainOutcome("done", self.env.rank, message=f"{self.out} existed: already trained")
        if self.generation != PRETRAIN:
            bad = set_aside_bad_new_shards(self.paths, self.generation)
            if bad:
                raise AzhpcError(f"generation {self.generation}'s shard(s) cannot be read: {'; '.join(bad)}; "
                                 f"azhpc resume plays them again, then trains")
        steps = plan_steps(self.cfg, self.paths, self.generation)
        mine = self._my_shards(steps)
        s = self._start(steps, mine)
        self._check_slices(s.step)
        _, late = self._agree(True, "" if self.deadline.remaining() >= self.margin_s else
                              f"the job started with {self.deadline.remaining():.0f} s left, below slurm.stop_margin_s "
                              f"({self.margin_s:.0f} s)")
        if late:  # a slow start (a loaded node): a slice without progress, which the stall rule counts
            message = (f"at step {s.step}/{steps}: {late}; requeued (raise --train-time or lower slurm.stop_margin_s "
                       f"if every slice starts this late)")
            print(f"[train rank {self.env.rank}] stopped {message}", file=sys.stderr, flush=True)
            if self.env.master:
                end_train_slice(self.paths.train_slices(self.generation + 1), s.step, f"stopped: {late}")
            return TrainOutcome("stopped", self.env.rank, s.step, steps, message)
        stream = self.generation if self.generation >= 0 else (1 << 32) + self.generation  # seeds are non-negative
        loader = iter(make_loader(BatchPlan(mine, self.local_batch, seed=(self.cfg.run.seed, stream, self.env.rank)),
                                  s.consumed, self.workers, self.cfg.train.value_target_q_ratio, self.cfg.model.attack_sets,
                                  pin=self.device.type == "cuda", horizon=self.cfg.train.value_target_horizon,
                                  material_horizon=self.cfg.train.material_horizon if self.cfg.model.material_head else 0))
        total_rows, bad_rows, bad_seen = sum(r.rows for r in mine), 0, set[str]()
        threads = StepThreads(self.device.type == "cpu", log=self.log)
        t_last = time.perf_counter()
        first_step, nonfinite = s.step, 0
        while s.step < steps:
            t0 = time.perf_counter()
            batch = next(loader)
            s.consumed += 1
            t_data = time.perf_counter() - t0
            for note in batch["bad"]:
                print(f"azhpc train: rank {self.env.rank} skipping {note}", file=sys.stderr, flush=True)
                for ref in mine:  # each bad shard counts once (every loader worker that reads it reports it)
                    if ref.path in note and ref.path not in bad_seen:
                        bad_seen.add(ref.path)
                        bad_rows += ref.rows
            if bad_rows > total_rows // 2:
                raise AzhpcError(f"more than half of rank {self.env.rank}'s positions are in corrupt shards (listed above): rerun their self-play tasks")
            if "planes" not in batch:
                continue
            threads.before_step()
            t_compute = time.perf_counter()
            out = self._forward_backward(s, batch)
            finite, stop = self._agree(bool(torch.isfinite(out.loss) & torch.isfinite(out.grad_norm)),
                                       self._stop_reason(s.step - first_step))
            if stop:  # this batch is not applied: the state points at it, the requeued job trains on it
                return self._stopped(s, steps, first_step, stop)
            if not finite:
                s.scaler.update()  # lets the fp16 scale shrink; skipping is ours, not the scaler's
                nonfinite += 1
                s.skipped += 1
                if nonfinite >= MAX_NONFINITE_IN_A_ROW:
                    raise AzhpcError(f"loss was not finite for {nonfinite} steps in a row at step {s.step}: lower train.lr; "
                                     f"the last good state {self.state_path} is untouched")
                continue
            nonfinite = 0
            s.scaler.step(s.opt)
            s.scaler.update()
            s.sched.step()
            s.step += 1
            now = time.perf_counter()
            threads.after_step(now - t_compute)
            if self.env.master:
                self._record(s, out, steps, seconds=max(now - t_last, 1e-9), t_data=t_data)
            self._step_s = max(now - t_last, 0.9 * self._step_s)
            t_last = now
            if s.step % self.cfg.train.checkpoint_every == 0 and s.step < steps:
                self._save_state(s.model, s.opt, s.sched, s.step, s.skipped, s.consumed)
                t_last = time.perf_counter()
        return self._finish(s, steps)

    def _my_shards(self, steps: int) -> list[ShardRef]:
        """This rank's share of the replay window (every world-th shard)."""
        tc = self.cfg.train
        if self.generation == PRETRAIN:
            window = imported_window(self.paths)
        else:
            window = replay_window(self.paths, self.generation, tc.window_generations, tc.window_positions)
        mine = window[self.env.rank :: self.env.world]
        if not mine:
            raise AzhpcError(f"rank {self.env.rank} got no shards ({len(window)} in the window for {self.env.world} ranks): use fewer ranks")
        arithmetic = "network in fp16 (fp16)" if tc.amp == "fp16" else describe_precision(tc.amp, self.device)
        self.log(f"{steps} steps of {tc.batch_size} over {len(window)} shards "
                 f"({sum(r.rows for r in window)} positions), world {self.env.world}, lr {self.lr:.4g}, device {self.device}, "
                 f"{arithmetic}")
        return mine

    def _start(self, steps: int, mine: list[ShardRef]) -> _Session:
        """The network, optimizer and schedule: from the last training state if there is one, else from the
        generation's network (and its optimizer moments); then wrapped for DDP, channels_last and compile."""
        tc = self.cfg.train
        if self.generation == PRETRAIN:
            model, payload = build_model(self.cfg.model, seed=self.cfg.run.seed), dict[str, Any]()
        else:
            if self.generation == 0:
                ensure_initial_checkpoint(self.paths.model(0), self.cfg.model, self.cfg.run.seed)
            model, payload = load_model(self.paths.model(self.generation), expect=self.cfg.model)
        model.to(self.device)
        opt = torch.optim.SGD(model.parameters(), lr=self.lr, momentum=tc.momentum, weight_decay=tc.weight_decay, nesterov=True)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(steps, self.generation, self.cfg.pretrain.lr_schedule))
        step = skipped = consumed = 0
        if self.state_path.exists():
            state = read_checkpoint(self.state_path)
            model.load_state_dict(state["state_dict"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            step, skipped, consumed = int(state["step"]), int(state["skipped_steps"]), int(state["data_position"])
            torch.set_rng_state(state["rng"]["torch"])
            self.log(f"resuming at step {step}/{steps} from {self.state_path}")
            self._trim_metrics(step)
        elif "optimizer" in payload:
            opt.load_state_dict(payload["optimizer"])
            for group in opt.param_groups:
                group["lr"] = self.lr
        memory_format = torch.channels_last if tc.channels_last else torch.preserve_format
        model.to(memory_format=memory_format)  # type: ignore[call-overload]  # stub gap: Module.to takes it
        ddp = DistributedDataParallel(model, device_ids=[self.device.index] if self.device.type == "cuda" else None) if self.env.world > 1 else model
        dtype = amp_dtype(tc.amp, self.device)
        return _Session(model=model, forward=torch.compile(ddp) if tc.compile else ddp, opt=opt, sched=sched,
                        scaler=torch.amp.GradScaler(self.device.type, enabled=dtype is torch.float16),
                        amp_dtype=dtype, memory_format=memory_format,
                        tb=_tensorboard(self.paths.tensorboard(self.generation + 1)) if self.env.master else None,
                        step=step, skipped=skipped, consumed=consumed)

    def _forward_backward(self, s: _Session, batch: dict) -> _StepOutput:
        """Loss and gradients of one batch (not yet applied), gradients unscaled and clipped."""
        x = batch["planes"].to(self.device, non_blocking=True, memory_format=s.memory_format)
        target_p = batch["policy"].to(self.device, non_blocking=True)
        target_v = batch["wdl"].to(self.device, non_blocking=True)
        s.model.train()
        aux = "material" in batch
        with torch.autocast(self.device.type, dtype=s.amp_dtype or torch.bfloat16, enabled=s.amp_dtype is not None):
            logits, value, *material = s.forward(x, material=True) if aux else s.forward(x)
        policy_loss, value_loss, logp = alphazero_loss(logits, value, target_p, target_v)
        loss = policy_loss + value_loss
        material_loss = None
        if aux:  # model.material_head: the material the side to move gains over the next plies, in 3-pawn units
            material_loss = F.smooth_l1_loss(material[0].float(), batch["material"].to(self.device, non_blocking=True))
            loss = loss + self.cfg.train.material_weight * material_loss
        s.opt.zero_grad(set_to_none=True)
        s.scaler.scale(loss).backward()
        s.scaler.unscale_(s.opt)
        grad_norm = torch.nn.utils.clip_grad_norm_(s.model.parameters(), 1e4)
        return _StepOutput(loss, policy_loss, value_loss, logp, logits, target_p, grad_norm, material_loss)

    def _agree(self, finite: bool, stop: str) -> tuple[bool, str]:
        """Every rank must agree to skip a step or to stop, or DDP falls out of step. A stop for a signal carries
        the signal's number, so a rank that has not seen the signal yet (SLURM signals each rank's process on its
        own, and under load one can be a step behind) records the signal as the reason, not "another rank stopped"."""
        if self.env.world > 1:
            code = 0.0
            if stop:
                name = stop.split()[1] if stop.startswith("signal SIG") else ""
                code = float(signal.Signals[name].value) if name in signal.Signals.__members__ else 1.0
            flags = torch.tensor([0.0 if finite else 1.0, code], device=self.device)
            dist.all_reduce(flags, op=dist.ReduceOp.MAX)
            theirs = int(flags[1])
            finite = bool(flags[0] == 0)
            if not stop and theirs:
                stop = f"signal {signal.Signals(theirs).name}" if theirs > 1 else "another rank stopped"
        return finite, stop

    def _record(self, s: _Session, out: _StepOutput, steps: int, seconds: float, t_data: float) -> None:
        """One metrics line (and TensorBoard scalars) for the step just applied (rank 0)."""
        with torch.no_grad():
            p = out.logp.exp()
            entropy = float(-(p * out.logp).sum(1).mean())
            agree = float((out.logits.argmax(1) == out.target_p.argmax(1)).float().mean())
        row = {"step": s.step, "steps": steps, "world_size": self.env.world, "policy_loss": out.policy_loss.item(),
               "value_loss": out.value_loss.item(), "policy_entropy": entropy, "top1_agreement": agree,
               "grad_norm": float(out.grad_norm), "lr": s.sched.get_last_lr()[0],
               "samples_per_s": self.cfg.train.batch_size / seconds, "data_wait_share": t_data / seconds,
               "skipped_steps": s.skipped}
        if out.material_loss is not None:
            row["material_loss"] = out.material_loss.item()
        self._metric(row)
        if s.tb is not None:
            for key, value in row.items():
                s.tb.add_scalar(f"train/{key}", value, s.step)

    def _stopped(self, s: _Session, steps: int, first_step: int, reason: str) -> TrainOutcome:
        """Save the state at the batch not applied, then say so on every rank (each node's stage reads its own
        ranks' outcomes)."""
        self._save_state(s.model, s.opt, s.sched, s.step, s.skipped, s.consumed - 1)
        if self.env.world > 1:
            dist.barrier()  # saved before any node's stage asks SLURM to requeue (which kills the job)
        if s.tb is not None:
            s.tb.close()
        message = (f"at step {s.step}/{steps} ({s.step - first_step} this attempt), {reason}; state saved in "
                   f"{self.state_path}")
        if self.env.master:
            end_train_slice(self.paths.train_slices(self.generation + 1), s.step, f"stopped: {reason}")
        print(f"[train rank {self.env.rank}] stopped {message}", file=sys.stderr, flush=True)
        return TrainOutcome("stopped", self.env.rank, s.step, steps, message)

    def _finish(self, s: _Session, steps: int) -> TrainOutcome:
        """Rank 0 writes the next generation's network (with its optimizer moments and metrics)."""
        if s.tb is not None:
            s.tb.close()
        digest = sum(float(p.detach().double().sum()) for p in s.model.parameters())
        print(f"[train rank {self.env.rank}] finished {s.step} steps, weight sum {digest:.10e}", flush=True)
        if self.env.master:
            save_checkpoint(self.out, s.model, self.generation + 1,
                            extra={"optimizer": s.opt.state_dict(), "trained_from": self.generation, "steps": s.step,
                                   "world_size": self.env.world, "skipped_steps": s.skipped, "metrics": self._last_metrics()})
            self.log(f"wrote {self.out}")
            end_train_slice(self.paths.train_slices(self.generation + 1), s.step, "done")
            if not self.cfg.train.keep_states:  # the network is written: a resume never reads the state again
                self.state_path.unlink(missing_ok=True)
        if self.env.world > 1:
            # Ranks leave together: a rank that tore gloo down while rank 0 was still writing the checkpoint
            # aborted ("terminate called without an active exception") and failed the job after its work was done.
            dist.barrier()
        return TrainOutcome("done", self.env.rank, s.step, steps, f"trained {s.step} steps: {self.out}")

    def _check_slices(self, step: int) -> None:
        """Give up, in one line, once ``slurm.max_attempts`` attempts in a row ended without saving a later step;
        an attempt that saved progress resets the count, so a long training spans any number of time limits."""
        if not self.env.master:
            return
        stalled, last = start_train_slice(self.paths.train_slices(self.generation + 1), step)
        check_stalled(f"generation {self.generation} training", stalled, self.cfg.slurm.max_attempts,
                      f"step {step} of the saved state",
                      "each slice must save a later state: lower train.checkpoint_every, raise slurm.train_time_min or "
                      "lower slurm.stop_margin_s; the job logs say what stopped each slice", last)

    def _save_state(self, model, opt, sched, step: int, skipped: int, consumed: int) -> None:
        if not self.env.master:
            return
        payload = {"schema": STATE_SCHEMA, "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                   "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "step": step,
                   "skipped_steps": skipped, "rng": {"torch": torch.get_rng_state()}, "data_position": consumed}
        t0 = time.perf_counter()
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        atomic.write_bytes(self.state_path, buffer.getbuffer(), doing="writing training state")
        self._save_s = time.perf_counter() - t0

    def _metric(self, row: dict) -> None:
        self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.metrics_path, "a") as fh:
            fh.write(json.dumps(row) + "\n")

    def _trim_metrics(self, step: int) -> None:
        """Drop metric rows after the resumed state, so every step appears once."""
        if self.env.master and self.metrics_path.exists():
            rows = [line for line in self.metrics_path.read_text().splitlines() if line.strip()]
            keep = []
            for line in rows:
                try:
                    if json.loads(line)["step"] <= step:
                        keep.append(line)
                except (json.JSONDecodeError, KeyError):
                    pass  # a line cut by the kill
            atomic.write_text(self.metrics_path, "".join(k + "\n" for k in keep))

    def _last_metrics(self) -> dict:
        if not self.metrics_path.exists():
            return {}
        lines = [json.loads(x) for x in self.metrics_path.read_text().splitlines() if x.strip()]
        if not lines:
            return {}
        first, last = lines[:10], lines[-10:]
        mean = lambda rows, k: float(np.mean([r[k] for r in rows]))  # noqa: E731
        keys = ("policy_loss", "value_loss", "top1_agreement", *(("material_loss",) if "material_loss" in lines[-1] else ()))
        return {k: mean(last, k) for k in keys} | {f"first_{k}": mean(first, k) for k in ("policy_loss", "value_loss")}


def _tensorboard(folder: Path):
    """A SummaryWriter when tensorboard is installed (optional), else None."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(folder))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m alphazero_hpc.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--generation", required=True, type=int)
    parser.add_argument("--workers", type=int, default=None, help="DataLoader workers per rank (default: train.loader_workers)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--outcomes", type=Path, default=None,
                        help="folder where this rank writes its outcome as local-LOCAL_RANK.json (the stage reads it)")
    args = parser.parse_args(argv)
    Stop.install()  # USR2 (SLURM's warning) and TERM (requeue, preemption): save the state at the next step
    env = dist_env()
    if env.world > 1:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if torch.cuda.is_available():
            torch.cuda.set_device(env.local_rank)
        dist.init_process_group(backend)
    try:
        outcome = Trainer(args.run_dir, args.generation, env, args.workers, args.device, Deadline.of_this_job()).run()
    except BaseException as exc:  # a user's error is one line; anything else (CUDA OOM, NCCL) is recorded, then raised
        if args.outcomes is not None and not isinstance(exc, (KeyboardInterrupt, SystemExit)):
            try:
                TrainOutcome("failed", env.rank, message=failure_line(exc)).write(args.outcomes, env.local_rank)
            except AzhpcError:
                pass  # a full disk: the error below matters more
        if not isinstance(exc, AzhpcError):
            raise
        return report(exc)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    if args.outcomes is not None:
        outcome.write(args.outcomes, env.local_rank)
    return EXIT_REQUEUE if outcome.status == "stopped" else 0


if __name__ == "__main__":
    sys.exit(main())
