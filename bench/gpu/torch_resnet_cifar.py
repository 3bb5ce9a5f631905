"""PyTorch's twin of bench/models/resnet18_cifar.cue, timed on the GPU.

    python3 torch_resnet_cifar.py [MODES]     (MODES: comma-separated, default all)

CIFAR ResNet-18 (3×3 stem, no max-pool, BasicBlocks [64,128,256,512]×2, 1×1
projection shortcuts; 11,173,962 parameters), batch 128, SGD momentum 0.9,
random data resident on the GPU. For each mode it prints one JSON line:
the median training-step time over 50 steps after 20 warm-ups (CUDA events),
batch-128 and batch-1 inference latency, and the peak memory a training step
allocated (torch.cuda.max_memory_allocated, after reset_peak_memory_stats),
and the device memory the process took (device_taken_bytes: the fall of
cudaMemGetInfo's free memory from just after the CUDA context was made to
the end of the training steps: the caching allocator's reserve, cuDNN's and
cuBLAS's handles, workspaces and kernels; as mlbuild's bench reports
device_memory_bytes; only the first mode starts from a clean process).
Modes: eager_fp32 (TF32 off, cudnn.benchmark), compile_fp32 (torch.compile
in its default mode), compile_ro_fp32 (mode="reduce-overhead": CUDA graphs),
and the same three in bf16 (autocast to bfloat16 + channels_last) and in
tf32 (fp32 tensors with TF32 allowed in cuDNN and cuBLAS, channels_last:
eager_tf32, compile_tf32, compile_ro_tf32). The first step (compilation
included) is reported apart.
"""
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, cin, c, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.proj = None
        if stride != 1 or cin != c:
            self.proj = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.proj(x) if self.proj is not None else x))


class ResNet18(nn.Module):
    def __init__(self, classes=10, channels=3):
        super().__init__()
        self.stem = nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(64)
        blocks, cin = [], 64
        for c, s in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [Block(cin, c, s), Block(c, c, 1)]
            cin = c
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = self.blocks(F.relu(self.bn(self.stem(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def timed(fn, warm, iters):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def run(mode):
    torch.manual_seed(0)
    bf16 = mode.endswith("bf16")
    tf32 = mode.endswith("tf32")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    compiled = mode.startswith("compile")
    options = {"mode": "reduce-overhead"} if mode.startswith("compile_ro") else {}
    dev = "cuda"
    model = ResNet18().to(dev)
    fmt = torch.channels_last if bf16 or tf32 else torch.contiguous_format
    model = model.to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(128, 3, 32, 32, device=dev).to(memory_format=fmt)
    y = torch.randint(0, 10, (128,), device=dev)
    x1 = x[:1].clone()
    fwd = torch.compile(model, **options) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()

    t0 = time.time()
    model.train()
    step()
    torch.cuda.synchronize()
    first = time.time() - t0
    torch.cuda.reset_peak_memory_stats()
    train_ms = timed(step, 20, 50)
    peak = torch.cuda.max_memory_allocated()
    taken = FREE_AT_START - torch.cuda.mem_get_info()[0]
    model.eval()

    def infer(inp):
        with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=bf16):
            fwd(inp)

    infer_ms = timed(lambda: infer(x), 10, 50)
    one_ms = timed(lambda: infer(x1), 10, 50)
    print(json.dumps(dict(mode=mode, train_step_ms=round(train_ms, 3), infer_b128_ms=round(infer_ms, 3),
                          infer_b1_ms=round(one_ms, 3), peak_train_bytes=peak, device_taken_bytes=taken,
                          first_step_s=round(first, 1))), flush=True)
    del model, opt, fwd, x, y, x1
    torch.cuda.empty_cache()


FREE_AT_START = 0


def main():
    global FREE_AT_START
    torch.cuda.init()
    FREE_AT_START = torch.cuda.mem_get_info()[0]
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    modes = (sys.argv[1] if len(sys.argv) > 1 else "eager_fp32,compile_fp32,compile_ro_fp32,eager_bf16,compile_bf16,compile_ro_bf16").split(",")
    for m in modes:
        run(m)


if __name__ == "__main__":
    main()
