"""Small transformer run configs for the workloads' tests: gpt-tiny on synthetic tokens, 4
sequences per rank (8 in all), AdamW, 1 warm-up and 4 measured steps."""

from __future__ import annotations

from typing import Optional


def tiny_lm_settings(seq_len: int, parallel: str, lm: Optional[dict] = None) -> dict:
    """The run-config fields every framework's transformer test shares; ``lm`` adds to or
    overrides the ``lm`` section (``parallel`` too)."""
    base = {"seq_len": seq_len, "parallel": parallel, "activation_checkpointing": "none"}
    return dict(
        model="gpt-tiny",
        data={"kind": "synthetic", "path": None, "samples": 1024},
        image_size=None,
        num_classes=None,
        batch_size=4,
        global_batch_size=8,
        steps={"warmup": 1, "measure": 4},
        optimizer={"name": "adamw", "lr": 1e-3, "base_lr": 1e-3, "weight_decay": 0.0},
        lm=dict(base, **(lm or {})),
    )


def lm_config(run_config, parallel: str, **overrides):
    """``run_config('pytorch', ...)`` of gpt-tiny in ``parallel`` mode over gloo, sequences of
    64; ``lm`` and any other field can be overridden."""
    settings = tiny_lm_settings(64, parallel, overrides.pop("lm", None))
    settings.update(framework_options={"backend": "gloo"}, **overrides)
    return run_config("pytorch", **settings)
