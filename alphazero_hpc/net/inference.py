"""The network as a search evaluator, and device selection (CUDA, MPS, CPU)."""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from ..errors import AzhpcError
from .cputhreads import StepThreads, fixed_threads
from .model import AlphaZeroNet
from .precision import describe as describe_precision, uses_bf16


def pick_device(requested: str = "auto") -> torch.device:
    """``auto`` picks CUDA, then MPS, then CPU; anything else is passed to torch.device."""
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    return torch.device(requested)


def _fold_batch_norms(model: AlphaZeroNet) -> torch.nn.Module:
    """The same function with each batch norm folded into the convolution before it (torch.fx's ``fuse``): at
    the small batches of CPU self-play the tiny net's evaluations got 10-20% faster, and a GPU runs fewer
    kernels. Traced with ``material=False`` (the material head is read only in training; a free argument would stop
    the trace at its ``if``). A model fx cannot trace is served as it is."""
    try:
        from torch.fx.experimental.optimization import fuse

        return fuse(torch.fx.symbolic_trace(model, concrete_args={"material": False}), no_trace=True)
    except Exception:  # noqa: BLE001 - an optimisation only
        return model


class TorchEvaluator:
    """Batched inference: float32 planes in, policy logits and a scalar value (win - loss) out.

    On CUDA the batch is copied through a pinned buffer. ``precision`` (``mcts.precision``) says whether the
    network runs under bf16 autocast: ``auto`` on CUDA only, ``bf16`` everywhere (on a CPU with native bf16,
    avx512_bf16 or AMX, 1.2-2.5x the evaluations/s of float32: docs/performance.md), ``bf16-if-native`` where the
    device has bf16 instructions (net/precision.py), ``float32`` nowhere; ``int8`` (a CPU only) runs the network
    quantized to int8 (net/quantize.py) instead of the float one. On CPU,
    ``AZHPC_TORCH_THREADS`` sets torch's thread count; otherwise a search pool measures which count is best
    (``cputhreads``). On a GPU (or MPS) torch gets one CPU thread unless ``AZHPC_TORCH_THREADS`` says otherwise: the
    setting is the process's, so later CPU torch work in the same process runs on one thread too.
    """

    def __init__(self, model: AlphaZeroNet, device: torch.device | str = "cpu", precision: str = "auto",
                 channels_last: bool = True) -> None:
        self.device = torch.device(device)
        self.int8 = precision == "int8"
        if self.int8 and self.device.type != "cpu":
            raise AzhpcError(f"mcts.precision int8 runs the network on a CPU only, and this one is on {self.device}: "
                             f"set mcts.precision to bf16 or auto for a GPU, or run on the CPU (--device cpu)")
        if self.int8:
            from .quantize import quantize_int8  # torch's quantization modules only where asked for

            self.model = quantize_int8(model)
        else:
            folded = _fold_batch_norms(model.eval())
            # a model fx could not fold is the caller's own: laid out and moved as a copy, the caller's left as it was
            self.model = (copy.deepcopy(folded) if folded is model else folded).to(self.device)
        self.history = model.cfg.history
        self.attack_planes = model.cfg.attack_sets  # sets of attack maps the planes end with (0, 1, 2)
        self.autocast = uses_bf16(precision, self.device)
        self.precision = describe_precision(precision, self.device)  # for the task's log
        self._pinned: torch.Tensor | None = None  # CUDA: the page-locked staging buffer of the planes, reused
        self._threads: StepThreads | None = None  # tune_threads(): torch's CPU thread count measured on the batches
        # mcts.channels_last: on CPU the weights and every batch are channels-last (NHWC), which oneDNN's convolutions
        # run without reordering into and out of their own layout; the same outputs, more evaluations/s (docs/performance.md)
        self.channels_last = channels_last and self.device.type == "cpu" and not self.int8
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # stub gap
        if self.device.type == "cpu":
            threads = fixed_threads()
            if threads is not None:
                torch.set_num_threads(threads)
        else:
            # On a GPU this process's CPU work is copying planes in and results out: torch's default of a thread per
            # core only spins between batches on the cores the search workers need (AZHPC_TORCH_THREADS still rules)
            torch.set_num_threads(fixed_threads() or 1)

    def _staged(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` copied into the pinned buffer, grown as batches grow (allocating page-locked memory costs far more
        than the copy). Reusing it is safe: the previous batch's copy to the GPU finished before its results came
        back."""
        n = x.shape[0]
        if (self._pinned is None or self._pinned.shape[0] < n or self._pinned.shape[1:] != x.shape[1:]
                or self._pinned.dtype != x.dtype):
            self._pinned = torch.empty((max(n, 64),) + tuple(x.shape[1:]), dtype=x.dtype, pin_memory=True)
        buf = self._pinned[:n]
        buf.copy_(x)
        return buf

    def describe(self) -> str:
        """The device in a line for progress records: ``cpu``, ``cpu, bf16`` (under bf16 autocast), or
        ``cuda:0 (NVIDIA H100 80GB HBM3), bf16``."""
        arithmetic = ", bf16" if self.autocast else ", int8" if self.int8 else ""
        if self.device.type != "cuda":
            return f"{self.device}{arithmetic}"
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)}){arithmetic}"

    def tune_threads(self, log=None) -> None:  # noqa: ANN001 - a callable taking one line
        """Measure torch's CPU thread count on this evaluator's own batches (``cputhreads.StepThreads``, per 64
        positions): one thread against the count given, kept the faster, measured again when the times drift.
        The matches of ``azhpc evaluate`` use it: with another busy process on the cores, two threads spinning at
        every barrier made a rating on this 2-core machine ~20x slower. Self-play does not (a tuned count rounds
        differently, so its games would not replay bitwise; the launchers give each task its cores instead), nor
        does a search pool's server (``ThreadTuner``). Nothing happens on a GPU or with ``AZHPC_TORCH_THREADS``."""
        if self.device.type == "cpu":
            self._threads = StepThreads(cpu=True, log=log, what="the network on the CPU", unit="64 positions")

    def cpu_threads(self) -> int | None:
        """Torch's intra-op thread count when the network runs on the CPU (the search pool tunes it), else None."""
        return torch.get_num_threads() if self.device.type == "cpu" else None

    def set_threads(self, threads: int) -> None:
        torch.set_num_threads(threads)

    @torch.inference_mode()
    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tuner = self._threads
        if tuner is not None:
            tuner.before_step()
            t0 = time.perf_counter()
        x = torch.from_numpy(planes)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        elif self.device.type == "cuda":
            x = self._staged(x).to(self.device, non_blocking=True)
        elif self.device.type != "cpu":
            x = x.to(self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast):
            policy, value = self.model(x)
        wdl = torch.softmax(value.float(), dim=1)
        v = wdl[:, 0] - wdl[:, 2]
        out = policy.float().cpu().numpy(), v.cpu().numpy()
        if tuner is not None:
            tuner.after_step((time.perf_counter() - t0) * 64 / max(1, len(planes)))
        return out
