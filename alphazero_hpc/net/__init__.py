"""The network: the residual model (``model``), checkpoints that rebuild it (``checkpoint``), the model as a
search evaluator on CUDA, MPS or CPU (``inference``) and the CPU thread count it gets (``cputhreads``)."""
