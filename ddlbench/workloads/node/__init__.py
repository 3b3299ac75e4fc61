"""Node-side tools: what a job script runs on each node outside the ranks (free ports, an
interface's address, the pre-flight, the GPU sampler, the health check) and the rank start
that places each rank before its workload imports a framework. Standard library only (NVML
through ``pynvml`` when it is there); Python 3.8 syntax."""
