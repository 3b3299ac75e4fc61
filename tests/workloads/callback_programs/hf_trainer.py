import sys

import torch
from transformers import Trainer, TrainingArguments

from ddlbench.workloads.steps_callbacks import hf_callback


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 2)

    def forward(self, x, labels=None):
        logits = self.l(x)
        return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}


class D(torch.utils.data.Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(8, generator=g), "labels": torch.tensor(i % 2)}


args = TrainingArguments(
    output_dir=sys.argv[1],
    max_steps=6,
    per_device_train_batch_size=4,
    report_to=[],
    use_cpu=True,
    save_strategy="no",
    logging_strategy="no",
    disable_tqdm=True,
)
Trainer(model=M(), args=args, train_dataset=D(), callbacks=[hf_callback(samples=4)]).train()
