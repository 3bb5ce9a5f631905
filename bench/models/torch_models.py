"""torch_models is the PyTorch side of the model benchmark (bench/models.sh).

It builds, in torch.nn, the same three architectures that bench/models/*.cue
and models/mnist.cue describe, and measures them the way the mlbuild binaries
measure themselves:

  torch_models.py info                          torch version, BLAS mapped, threads
  torch_models.py params MODEL                  parameter count (checked against mlbuild's)
  torch_models.py infer MODEL [--iters N]       median ms of batch-250 and batch-1 inference
  torch_models.py train MODEL --data DIR        seconds of one 60000-image training epoch

A MODEL ending in _bf16 runs under torch.autocast to bfloat16 (split_precision).

Every command prints one JSON object. Run it with Debian's /usr/bin/python3
(whose python3-torch this is), with the optimised OpenBLAS selected by
LD_LIBRARY_PATH and OMP_NUM_THREADS equal to BENCH_THREADS, so that torch's
OpenMP pool and OpenBLAS's are libgomp's one pool (../../../shared
BENCHMARKS.md explains why); BENCH_THREADS is also passed to
torch.set_num_threads, since torch defaults to one thread on these machines.
"""
import argparse
import contextlib
import gzip
import json
import os
import statistics
import sys
import time

import torch
from torch import nn

BATCH = 250
LR = 1e-3


def split_precision(name):
    """A model name and its arithmetic: "mlp_bf16" is the MLP trained and run
    under torch.autocast to bfloat16 on the CPU (PyTorch's mixed precision:
    bf16 products through oneDNN, AMX where the CPU has it, float32 weights
    and optimizer), the counterpart of a spec with precision: "bf16"."""
    if name.endswith("_bf16"):
        return name[:-len("_bf16")], torch.bfloat16
    return name, None


def build(name):
    """The architecture named name, layer for layer as in its CUE spec."""
    if name == "mlp":  # bench/models/mlp.cue
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(784, 512), nn.ReLU(),
            nn.Linear(512, 256), nn.ReLU(),
            nn.Linear(256, 10),
        )
    if name == "lenet5":  # bench/models/lenet5.cue
        return nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(400, 120), nn.ReLU(),
            nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, 10),
        )
    if name == "mnist":  # models/mnist.cue
        return nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(3136, 128), nn.ReLU(),
            nn.Linear(128, 10),
        )
    raise SystemExit(f"torch_models.py: unknown model {name!r}; models: mlp, lenet5, mnist")


def loaded_blas():
    """The BLAS (and OpenMP) libraries this process really mapped. A BLAS
    linked statically into libtorch (MKL in pip wheels) is not a file of its
    own: the info command's "mkl" field tells about that one."""
    seen = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line[line.find("/"):].strip() if "/" in line else ""
            if any(k in path for k in ("blas", "mkl", "gomp")) and path not in seen:
                seen.append(path)
    return seen


def read_idx(path):
    """The payload of an IDX file (optionally gzipped) and its shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 8:
        raise SystemExit(f"torch_models.py: {path}: not an unsigned-byte IDX file")
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def median_ms(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def autocast(dtype):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=dtype)


def cmd_infer(model, iters, dtype):
    model.eval()
    g = torch.Generator().manual_seed(7)
    xb = torch.rand(BATCH, 1, 28, 28, generator=g)
    x1 = torch.rand(1, 1, 28, 28, generator=g)
    with torch.inference_mode(), autocast(dtype):
        batch_ms = median_ms(lambda: model(xb), iters, 5)
        one_ms = median_ms(lambda: model(x1), iters, 5)
    return {"infer_batch_ms": batch_ms, "infer_batch1_ms": one_ms,
            "infer_images_per_sec": BATCH / (batch_ms / 1e3), "iterations": iters}


def cmd_train(model, data, limit, dtype):
    """One epoch over the training set, timed like mlbuild's epoch report:
    from the start of the first batch to the end of the last, counting each
    batch's gather from the shuffled order, forward, loss, backward, Adam step
    and the running loss and accuracy (mlbuild counts them too)."""
    images = read_idx(os.path.join(data, "train-images-idx3-ubyte"))
    labels = read_idx(os.path.join(data, "train-labels-idx1-ubyte")).long()
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = images.float().div_(255).unsqueeze(1).contiguous()
    steps = x.shape[0] // BATCH
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(1))
    sum_loss, correct = 0.0, 0
    start = time.perf_counter()
    for b in range(steps):
        idx = order[b * BATCH:(b + 1) * BATCH]
        xb, yb = x[idx], labels[idx]
        opt.zero_grad(set_to_none=True)
        with autocast(dtype):
            out = model(xb)
            loss = loss_fn(out, yb)
        loss.backward()
        opt.step()
        sum_loss += loss.item()
        correct += int((out.argmax(1) == yb).sum())
    seconds = time.perf_counter() - start
    return {"epoch_s": seconds, "images": steps * BATCH, "loss": sum_loss / steps,
            "acc": correct / (steps * BATCH)}


def main():
    p = argparse.ArgumentParser(description="PyTorch side of bench/models.sh")
    p.add_argument("command", choices=["info", "params", "infer", "train"])
    p.add_argument("model", nargs="?", default="")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--data", default="data/mnist")
    p.add_argument("--limit", type=int, default=0)
    a = p.parse_args()
    threads = int(os.environ.get("BENCH_THREADS", "1"))
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    out = {"threads": torch.get_num_threads()}
    if a.command == "info":
        out.update(torch=torch.__version__, python=sys.executable,
                   mkldnn=torch.backends.mkldnn.is_available(),
                   mkl=torch.backends.mkl.is_available(),
                   omp_num_threads=os.environ.get("OMP_NUM_THREADS", ""),
                   blas=loaded_blas())
    else:
        name, dtype = split_precision(a.model)
        model = build(name)
        out["params"] = sum(t.numel() for t in model.parameters())
        if a.command == "infer":
            out.update(cmd_infer(model, a.iters, dtype))
        elif a.command == "train":
            out.update(cmd_train(model, a.data, a.limit, dtype))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
