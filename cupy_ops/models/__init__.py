"""KernelBench problem/solution pairs: each module has ``Model`` (the torch reference),
``ModelNew`` (the cupy_ops drop-in), ``get_inputs()`` and ``get_init_inputs()``."""
