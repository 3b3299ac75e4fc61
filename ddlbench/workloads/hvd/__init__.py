"""The Horovod workloads on PyTorch and TensorFlow (``horovod_torch``, ``horovod_tf``) and the
rendezvous server every task meets at. They reuse the PyTorch and TensorFlow workloads'
models and steps. Python 3.8 syntax."""
