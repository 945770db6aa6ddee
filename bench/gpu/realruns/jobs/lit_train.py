import torch
import torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader
from common import ConvNet, RandomImages


class LitModel(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = ConvNet()

    def training_step(self, batch, idx):
        loss = F.cross_entropy(self.net(batch["image"]), batch["label"])
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main():
    trainer = L.Trainer(max_epochs=1000, accelerator="gpu", devices=1, enable_checkpointing=False, logger=False)
    trainer.fit(LitModel(), DataLoader(RandomImages(4096), batch_size=64, num_workers=2))


if __name__ == "__main__":
    main()
