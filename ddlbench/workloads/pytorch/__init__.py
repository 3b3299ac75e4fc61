"""The PyTorch workload (``torch_main``): its models, data, knobs, straggler hooks, backup
workers and the transformer language models with their parallelism (DDP, FSDP, ZeRO).
Standard library, numpy and torch only (Pillow for image folders); Python 3.8 syntax."""
