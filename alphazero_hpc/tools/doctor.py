"""``azhpc doctor``: what this machine offers a run, each check a real operation, not a guess."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def _device_checks() -> list[Check]:
    import torch

    out = []
    candidates = []
    if torch.cuda.is_available():
        candidates.append(("cuda", torch.cuda.get_device_name(0) + f" (x{torch.cuda.device_count()})"))
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        candidates.append(("mps", "Apple Metal"))
    candidates.append(("cpu", f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"))
    for kind, name in candidates:
        try:
            x = torch.randn(256, 256, device=kind)
            t0 = time.perf_counter()
            y = (x @ x).sum().item()
            ms = (time.perf_counter() - t0) * 1000
            out.append(Check(f"device {kind}", bool(y == y), f"{name}; 256x256 matmul {ms:.2f} ms"))
        except Exception as exc:  # noqa: BLE001 - report, don't crash
            out.append(Check(f"device {kind}", False, f"{name}; tensor op failed: {exc}"))
    out.insert(0, Check("device chosen", True, candidates[0][0]))
    return out


def _command(name: str, args: list[str]) -> Check:
    path = shutil.which(name)
    if path is None:
        return Check(name, False, "not on PATH (no SLURM here: azhpc runs locally)")
    try:
        res = subprocess.run([name, *args], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        return Check(name, False, f"{path} did not answer within 15 s")
    text = (res.stdout or res.stderr).strip().splitlines()
    first = text[0] if text else ""
    return Check(name, res.returncode == 0, f"{path}: {first[:100]}" if res.returncode == 0 else f"{path} failed: {first[:100]}")


def _writable(run_root: Path) -> Check:
    try:
        run_root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=run_root, prefix=".doctor.") as fh:
            fh.write(b"x")
            fh.flush()
            os.fsync(fh.fileno())
        free = shutil.disk_usage(run_root).free / 2**30
        return Check("run folder", True, f"{run_root.resolve()} writable, {free:.1f} GiB free")
    except OSError as exc:
        return Check("run folder", False, f"{run_root}: {exc.strerror}: choose another --run-dir")


def _versions() -> Check:
    import chess
    import h5py
    import numpy
    import submitit
    import torch

    from .. import __version__

    return Check("versions", True, f"azhpc {__version__}, python {platform.python_version()}, torch {torch.__version__}, "
                                   f"numpy {numpy.__version__}, python-chess {chess.__version__}, h5py {h5py.__version__}, "
                                   f"submitit {submitit.__version__}")


def run_doctor(run_root: Path) -> list[Check]:
    checks = _device_checks()
    checks += [_command("sbatch", ["--version"]), _command("squeue", ["--noheader", "--me"]),
               _command("sacct", ["--noheader", "-X", "--starttime", "now-1hour"])]
    checks.append(_writable(run_root))
    checks.append(_versions())
    return checks
