"""Self-play: a task's plan of games and shards (``plan``), the engine that plays many games at once through
the search API (``engine``), what a complete shard leaves on disk (``output``), search processes sharing one
network server (``pool``) and how they talk to it (``transport``: shared-memory slots, 8-byte requests, typed
control messages), and the task a SLURM array element runs (``task``)."""
