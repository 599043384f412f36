"""Training: the replay window read in whole shards (``data``) and the DDP trainer that writes the next
generation's network (``trainer``; ``python -m alphazero_hpc.train`` under torchrun or srun), and the mean of a run's last networks
(``average``: ``azhpc average``, stochastic weight averaging)."""
