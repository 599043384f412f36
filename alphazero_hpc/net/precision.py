"""Whether the network runs in bf16: ``mcts.precision`` and ``train.amp`` on a device.

``bf16-if-native`` (configs/learn.yaml) asks for bf16 only where the hardware has it: a CPU with bf16 instructions
(x86 ``avx512_bf16`` or ``amx_bf16``, aarch64 ``bf16``) or a GPU that runs bf16 itself, float32 elsewhere. Torch
emulates bf16 on a CPU without them, and that costs far more than it saves: on a 2-core AMD EPYC family 25 model 1
(Zen 3, AVX2 only) the 6x64 net of configs/learn.yaml searched at 0.16x its float32 simulations/s and trained
at 0.08x, where a CPU with avx512_bf16 runs the same net 1.2-2.5x faster than float32 (docs/performance.md).
"""

from __future__ import annotations

import functools
import platform
from pathlib import Path

import torch

NATIVE_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})  # x86 /proc/cpuinfo flags; aarch64's Features


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's feature flags (``flags`` on x86, ``Features`` on aarch64) from ``cpuinfo``, else /proc/cpuinfo;
    empty where there is none (not Linux)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name with its family and model numbers (``cpuinfo``, else /proc/cpuinfo), e.g. "AMD EPYC
    (family 25 model 17)": what a timed rung's games and a run's CPU-hours were measured on, recorded beside them.
    The numbers matter on cloud machines, whose model names are often as bare as "AMD EPYC"."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            break  # the first processor's block is enough
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown"
    if fields.get("cpu family") and fields.get("model"):
        name += f" (family {fields['cpu family']} model {fields['model']})"
    return name


@functools.cache
def cpu_has_native_bf16() -> bool:
    """This machine's CPU has bf16 instructions (read once per process)."""
    return bool(cpu_flags() & NATIVE_CPU_FLAGS)


def native_bf16(device: torch.device | str) -> bool:
    """``device`` runs bf16 arithmetic itself: a CPU with bf16 instructions, a CUDA GPU of compute capability 8.0
    or above (Ampere on); not MPS."""
    device = torch.device(device)
    if device.type == "cpu":
        return cpu_has_native_bf16()
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device)[0] >= 8
    return False


def uses_bf16(setting: str, device: torch.device | str) -> bool:
    """Whether ``setting`` (``mcts.precision`` or ``train.amp``) runs the network in bf16 on ``device``: ``bf16``
    always, ``auto`` on CUDA, ``bf16-if-native`` where ``native_bf16``; otherwise not."""
    device = torch.device(device)
    return (setting == "bf16" or (setting == "auto" and device.type == "cuda")
            or (setting == "bf16-if-native" and native_bf16(device)))


def describe(setting: str, device: torch.device | str) -> str:
    """One line for a log: what ``setting`` resolves to on ``device`` and why."""
    if setting == "int8":
        return "network in int8 (int8: quantized for the CPU, net/quantize.py)"
    bf16 = uses_bf16(setting, device)
    if setting != "bf16-if-native":
        return f"network in {'bf16' if bf16 else 'float32'} ({setting})"
    if bf16:
        return "network in bf16 (bf16-if-native: the device has bf16 instructions)"
    return (f"network in float32 (bf16-if-native: {torch.device(device).type} has no bf16 instructions, "
            "where emulated bf16 is several times slower)")
