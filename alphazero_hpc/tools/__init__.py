"""Tools around the pipeline: ``azhpc bench`` (``bench``: self-play, shard and trainer throughput; ``learning``:
search arms on one CPU budget; ``pgnbench``: import speed and pretraining; ``chaos``: a local run under seeded
kills, full disks and corrupt shards, checked after), Stockfish games as PGN (``sfgames``)
and ``azhpc doctor`` (``doctor``: what this machine offers a run)."""
