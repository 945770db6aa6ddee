import torch
import torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader
from common import ConvNet, RandomImages


class Shifted(RandomImages):
    def __getitem__(self, i):
        item = super().__getitem__(i)
        item["label"] = item["label"] + 1          # labels 1..10 for a 10-class head
        return item


class LitModel(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = ConvNet(n_classes=10)

    def training_step(self, batch, idx):
        loss = F.cross_entropy(self.net(batch["image"]), batch["label"])
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    L.Trainer(max_epochs=2, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False).fit(
        LitModel(), DataLoader(Shifted(2048), batch_size=64))
