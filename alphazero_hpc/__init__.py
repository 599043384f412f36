"""alphazero_hpc: AlphaZero-style chess training on SLURM clusters.

The package is a library first; `azhpc` (alphazero_hpc.cli) and the SLURM jobs are thin callers of it.
"""

__version__ = "0.1.0"
