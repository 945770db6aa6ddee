# A long training loop (stopped from outside by `timeout`).
import time
for step in range(1, 100000):
    if step % 10 == 0:
        print(f"step {step}: loss {1.0 / step:.5f}", flush=True)
    time.sleep(0.02)
