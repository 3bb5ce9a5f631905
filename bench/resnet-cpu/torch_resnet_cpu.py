"""PyTorch's twin of bench/models/resnet18_cifar.cue on the CPU (issue #30).

    python3 torch_resnet_cpu.py THREADS ITERS [MODES]

The model is bench/gpu/torch_resnet_cifar.py's ResNet18 (imported from
there, so both benchmarks time the same network): batch 128, SGD momentum
0.9, random data. For each mode it prints one JSON line with the median
training-step time over ITERS steps after 2 warm-ups, and the batch-128
and batch-1 inference latencies (eval mode, no_grad). Modes: fp32
(contiguous), fp32_cl (channels_last, oneDNN's preferred layout where
PyTorch has it) and bf16_cl (CPU autocast to bfloat16 + channels_last).
"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [here, os.path.join(here, "..", "gpu")]  # a bundle's copy beside it, or the tree's
from torch_resnet_cifar import ResNet18  # noqa: E402


def median_ms(fn, warm, iters):
    for _ in range(warm):
        fn()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]


def run(mode, iters):
    torch.manual_seed(0)
    bf16 = mode.startswith("bf16")
    fmt = torch.channels_last if mode.endswith("_cl") else torch.contiguous_format
    model = ResNet18().to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(128, 3, 32, 32).to(memory_format=fmt)
    y = torch.randint(0, 10, (128,))
    x1 = x[:1].clone()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    model.train()
    train_ms = median_ms(step, 2, iters)
    model.eval()

    def infer(inp):
        with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            model(inp)

    infer_ms = median_ms(lambda: infer(x), 2, iters)
    one_ms = median_ms(lambda: infer(x1), 5, 5 * iters)
    print(json.dumps(dict(mode=mode, threads=torch.get_num_threads(), torch=torch.__version__,
                          train_step_ms=round(train_ms, 1), infer_b128_ms=round(infer_ms, 1),
                          infer_b1_ms=round(one_ms, 3))), flush=True)


def main():
    threads, iters = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    modes = (sys.argv[3] if len(sys.argv) > 3 else "fp32,fp32_cl,bf16_cl").split(",")
    for m in modes:
        try:
            run(m, iters)
        except Exception as e:  # a mode this PyTorch lacks (bf16 autocast on the CPU in old releases)
            print(json.dumps(dict(mode=m, error=str(e)[:200])), flush=True)


if __name__ == "__main__":
    main()
