"""Training: the replay window read in whole shards (``data``) and the DDP trainer that writes the next
generation's network (``trainer``; ``python -m alphazero_hpc.train`` under torchrun or srun)."""
