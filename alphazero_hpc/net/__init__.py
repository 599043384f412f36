"""The network: the residual model (``model``), checkpoints that rebuild it (``checkpoint``), the model as a
search evaluator on CUDA, MPS or CPU (``inference``), whether it runs in bf16 there (``precision``), the network
quantized to int8 for the CPU (``quantize``) and the CPU thread count it gets (``cputhreads``)."""
