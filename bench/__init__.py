"""Side-by-side benchmarks: ember against PyTorch, same workloads, one process run."""
