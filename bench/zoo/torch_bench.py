"""PyTorch's side of `make bench-zoo`: a torchvision classifier's CPU inference.

    python3 torch_bench.py NAME THREADS ITERS

Random weights, eval mode, torch.inference_mode, batch 32 and batch 1 at
224x224, on THREADS threads (oneDNN). Two configurations, the better of
which is PyTorch at its best here: eager with channels_last, and TorchScript
frozen and optimized for inference (torch.jit.optimize_for_inference: batch
norm folded, oneDNN layouts). Prints one JSON line: the median milliseconds
of ITERS runs after 3 warm-ups, per configuration and the best.
"""
import json
import sys
import time

import torch
import torchvision


def median_ms(fn, iters):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        ts.append(1000 * (time.perf_counter() - t))
    return sorted(ts)[len(ts) // 2]


def main():
    name, threads, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    kwargs = {"weights": None}
    if name == "googlenet":
        kwargs.update(aux_logits=False, init_weights=True)
    model = getattr(torchvision.models, name)(**kwargs).eval()
    cl = torch.channels_last
    x32 = torch.randn(32, 3, 224, 224).to(memory_format=cl)
    x1 = x32[:1].clone()
    res = {"model": name, "threads": threads, "torch": torch.__version__}
    eager = model.to(memory_format=cl)  # outside inference_mode: TorchScript cannot take inference tensors
    with torch.inference_mode():
        res["eager_b32_ms"] = median_ms(lambda: eager(x32), iters)
        res["eager_b1_ms"] = median_ms(lambda: eager(x1), iters)
    try:
        with torch.no_grad():
            script = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(model, x1).eval()))
            res["jit_b32_ms"] = median_ms(lambda: script(x32), iters)
            res["jit_b1_ms"] = median_ms(lambda: script(x1), iters)
    except Exception as e:  # a model TorchScript cannot take: eager stands
        res["jit_error"] = str(e)[:200]
    for b in ("b32", "b1"):
        res["best_" + b + "_ms"] = min(v for k, v in res.items() if k.endswith(b + "_ms"))
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}), flush=True)


if __name__ == "__main__":
    main()
