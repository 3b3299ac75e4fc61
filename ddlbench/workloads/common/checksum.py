"""Parameter checksum shared by every framework.

All ranks of a data-parallel run must end with identical parameters; the
summary record carries their float64 sum and the SHA-256 of their bytes so the
collector can prove it.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Tuple

import numpy as np


def param_checksum(arrays: Iterable[np.ndarray]) -> Tuple[float, str]:
    """``(sum as float64, sha256 hex)`` over ``arrays`` in the order given.

    Callers pass the parameters in the model's fixed order (definition order,
    e.g. ``model.parameters()`` in PyTorch, ``model.trainable_variables`` in
    TensorFlow). Each array is hashed as C-contiguous little-endian bytes of its
    own dtype (float32 for fp32 and AMP master weights); shapes are not hashed.
    """
    sha = hashlib.sha256()
    total = 0.0
    for a in arrays:
        a = np.asarray(a)
        if a.dtype.byteorder not in ("|", "<"):  # no copy when native is little-endian
            a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        a = np.ascontiguousarray(a)
        total += float(np.sum(a, dtype=np.float64))
        sha.update(a.reshape(-1).view(np.uint8))
    return total, sha.hexdigest()
