"""Tools around the pipeline: ``azhpc bench`` (``bench``: self-play, shard and trainer throughput) and
``azhpc doctor`` (``doctor``: what this machine offers a run)."""
