# A feature-building job whose cache grows until the memory limit: a real cgroup OOM kill.
import time
cache = []
for step in range(1, 10_000):
    cache.append(bytearray(32 << 20))          # 32 MiB per step, touched
    for j in range(0, len(cache[-1]), 4096):
        cache[-1][j] = 1
    print(f"step {step}: cache {len(cache) * 32} MiB", flush=True)
    time.sleep(0.05)
