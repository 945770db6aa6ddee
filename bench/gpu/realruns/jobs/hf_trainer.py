import torch
from datasets import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments


def make_dataset(n=2048, seq=512):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 30000, (n, seq), generator=g)
    return Dataset.from_dict({"input_ids": ids.tolist(), "attention_mask": torch.ones(n, seq, dtype=torch.long).tolist(),
                              "labels": torch.randint(0, 2, (n,), generator=g).tolist()})


def main():
    cfg = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                     max_position_embeddings=512, num_labels=2)
    model = BertForSequenceClassification(cfg)
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=512, num_train_epochs=1,
                             logging_steps=1, report_to=[], save_strategy="no")
    Trainer(model=model, args=args, train_dataset=make_dataset()).train()


if __name__ == "__main__":
    main()
