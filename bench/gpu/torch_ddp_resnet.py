"""PyTorch DDP twin of mlbuild's `train --gpus 2` on CIFAR ResNet-18.

    torchrun --nproc_per_node N torch_ddp_resnet.py [BATCH_PER_GPU] [STEPS]

The model is torch_resnet_cifar.py's (imported, so the two cannot drift):
CIFAR ResNet-18, SGD momentum 0.9, fp32 with TF32 off (as mlbuild's f32
programs), cudnn.benchmark, random data resident on each GPU, BATCH_PER_GPU
(default 128) images per GPU per step. DistributedDataParallel all-reduces
the gradients in buckets overlapped with the backward pass (its defaults:
25 MiB buckets). Rank 0 prints one JSON line: the median step time over
STEPS (default 50) steps after 20 warm-ups, timed with CUDA events around
whole steps with a barrier before each, and images/s of every GPU
together.
"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from torch_resnet_cifar import ResNet18


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = DDP(ResNet18().cuda(), device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator(device="cuda").manual_seed(rank)
    x = torch.randn(batch, 3, 32, 32, device="cuda", generator=g)
    y = torch.randint(0, 10, (batch,), device="cuda", generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    model.train()
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    ms = sorted(times)[len(times) // 2]
    if rank == 0:
        print(json.dumps(dict(framework="pytorch-ddp", gpus=world, batch_per_gpu=batch, global_batch=batch * world,
                              train_step_ms=round(ms, 3), images_per_sec=round(batch * world / ms * 1000, 1),
                              torch=torch.__version__, nccl=".".join(map(str, torch.cuda.nccl.version())))), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
