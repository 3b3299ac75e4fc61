"""The MXNet workload (``mxnet_main``: Gluon on a parameter-server kvstore), its models and
data. Standard library, numpy and MXNet only; Python 3.8 syntax."""
