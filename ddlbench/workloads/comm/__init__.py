"""The communication tests (mode ``allreduce``): the allreduce sweep over message sizes with
PyTorch or Horovod, and the pairwise test that finds a slow link. Python 3.8 syntax."""
