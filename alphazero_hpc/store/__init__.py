"""What a run leaves on shared storage, and the only code that knows where: every path and listing of a run
(``paths``), atomic writes (``atomic``), the run folder's config (``runconfig``), HDF5 shards and their sidecars
(``shards``), and the progress records of self-play, training and evaluation (``progress``)."""
