# A training loop that saves a checkpoint every few steps into a small volume.
import os, sys, torch
out = sys.argv[1]
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, 200):
    x = torch.randn(32, 1024); loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 5 == 0:
        path = os.path.join(out, f"ckpt-{step:04d}.pt")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, path)
        print(f"step {step}: loss {loss.item():.4f}, saved {path}", flush=True)
