"""Tools around the pipeline: ``azhpc bench`` (``bench``: self-play, shard and trainer throughput; ``learning``:
search arms on one CPU budget; ``pgnbench``: import speed and pretraining; ``chaos``: a local run under seeded
kills, full disks and corrupt shards, checked after; ``growth``: status, training start-up and launch against run
size, on synthetic runs; ``wide``: a wide self-play array on a SLURM cluster, each task's start-up and status's
answer time), Stockfish games as PGN (``sfgames``)
and ``azhpc doctor`` (``doctor``: what this machine offers a run)."""
