"""A small transformer run config for the PyTorch workload's tests: gpt-tiny on synthetic
tokens, 4 sequences of 64 per rank, AdamW, gloo."""

from __future__ import annotations


def lm_config(run_config, parallel: str, **overrides):
    """``run_config('pytorch', ...)`` of gpt-tiny in ``parallel`` mode; ``lm`` and any other
    field can be overridden."""
    lm = {"seq_len": 64, "parallel": parallel, "activation_checkpointing": "none"}
    lm.update(overrides.pop("lm", {}))
    settings = dict(
        framework_options={"backend": "gloo"},
        model="gpt-tiny",
        data={"kind": "synthetic", "path": None, "samples": 1024},
        image_size=None,
        num_classes=None,
        batch_size=4,
        global_batch_size=8,
        steps={"warmup": 1, "measure": 4},
        optimizer={"name": "adamw", "lr": 1e-3, "base_lr": 1e-3, "weight_decay": 0.0},
        lm=lm,
    )
    settings.update(overrides)
    return run_config("pytorch", **settings)
