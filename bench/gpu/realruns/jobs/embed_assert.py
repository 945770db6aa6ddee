import torch
import torch.nn as nn
import torch.nn.functional as F
from common import log

VOCAB = 30000


class TextClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 256)
        self.rnn = nn.GRU(256, 256, batch_first=True)
        self.out = nn.Linear(256, 4)

    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.out(h[:, -1])


def tokenize(texts, vocab_size=32000):
    # hashes words into a vocabulary of vocab_size ids (the tokenizer's size, not the model's)
    return [[hash(w) % vocab_size for w in t.split()][:32] + [0] * (32 - len(t.split()[:32])) for t in texts]


def main():
    model = TextClassifier().cuda()
    opt = torch.optim.Adam(model.parameters())
    texts = [f"sample {i} " + " ".join(f"word{j*i}" for j in range(40)) for i in range(64)]
    for step in range(10):
        ids = torch.tensor(tokenize(texts[step:step + 16]), device="cuda")
        y = torch.randint(0, 4, (ids.shape[0],), device="cuda")
        loss = F.cross_entropy(model(ids), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
