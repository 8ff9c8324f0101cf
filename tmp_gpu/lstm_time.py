import sys, time
sys.path.insert(0, ".")
import numpy as np, ember, torch
from bench.cuda import _lstm_layer
from bench.harness import median_times
torch.backends.cuda.matmul.allow_tf32 = False
fns = {"ember": _lstm_layer(ember), "torch": _lstm_layer(torch)}
t = median_times(fns, budget=3.0)
print({k: f"{v*1e3:.2f} ms" for k, v in t.items()}, "ratio", t["ember"] / t["torch"])
# forward only / backward split for ember
net = ember.nn.LSTM(256, 512).cuda()
x = ember.randn(128, 64, 256, device="cuda", requires_grad=True)
for _ in range(3):
    out, _ = net(x); out.sum().backward()
ember.cuda.synchronize()
for _ in range(3):
    t0 = time.perf_counter(); out, _ = net(x); ember.cuda.synchronize(); t1 = time.perf_counter()
    out.sum().backward(); ember.cuda.synchronize(); t2 = time.perf_counter()
    print(f"ember fwd {1e3*(t1-t0):.2f} ms bwd {1e3*(t2-t1):.2f} ms")
import cProfile, pstats
pr = cProfile.Profile(); pr.enable()
out, _ = net(x); out.sum().backward(); ember.cuda.synchronize()
pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
