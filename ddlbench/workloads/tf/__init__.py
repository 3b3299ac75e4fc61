"""The TensorFlow and Keras workloads (``tf_main``, ``keras_main``), their models and the
``TF_CONFIG`` they build from Slurm. Standard library, numpy and TensorFlow only; Python 3.8
syntax. (Not named ``tensorflow``: a folder on ``sys.path`` would hide the real one.)"""
