import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from ddlbench.workloads.steps_callbacks import lightning_callback


class M(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 2)

    def training_step(self, batch, i):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.l(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


data = DataLoader(TensorDataset(torch.randn(24, 8), torch.randint(0, 2, (24,))), batch_size=4)
t = L.Trainer(
    max_epochs=1,
    accelerator="cpu",
    devices=1,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    callbacks=[lightning_callback(samples=4)],
)
t.fit(M(), data)
