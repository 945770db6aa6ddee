# A scoring job that reads a record through a bad pointer (ctypes): a real SIGSEGV.
import ctypes, time
print("scoring 3 shards", flush=True)
for i in range(3):
    print(f"shard {i}: 1000 records", flush=True)
    time.sleep(0.2)
ctypes.string_at(0x10, 16)
