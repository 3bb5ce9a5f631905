"""PyTorch's twin of bench/models/resnet18_fashion.cue's training run.

    python3 torch_resnet_fashion.py DATA MODE [EPOCHS]   (MODE: fp32 or bf16)

Trains the CIFAR ResNet-18 of torch_resnet_cifar.py with one input channel
on Fashion-MNIST's 60,000 training images from the IDX files in DATA (as
make data-fashion writes them): each 28×28 image scaled to [0, 1],
zero-padded to 32×32 and normalised with mean 0.2860 and deviation 0.3530,
as the spec's idx dataset does. The recipe is the spec's: SGD with momentum
0.9 and weight decay 5e-4 on every parameter, batch 128 (the last partial
batch of an epoch dropped, as mlbuild does), a learning rate of 0.05 on a
per-epoch cosine to 5e-4 (epoch e of E trains at
5e-4 + (0.05 − 5e-4)·(1 + cos(π·e/(E−1)))/2, mlbuild's schedule), no
augmentation, the whole set resident on the GPU. fp32 keeps TF32 off; bf16
is autocast to bfloat16 with channels_last, the configuration a PyTorch
user picks. It prints one JSON line: the mode, each epoch's mean training
loss, the accuracy on the 10,000 test images and the training seconds.
"""
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from torch_resnet_cifar import ResNet18


def idx(path):
    with open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def images(path):
    x = torch.tensor(idx(path), dtype=torch.float32).div_(255)
    x = F.pad(x, (2, 2, 2, 2))
    return ((x - 0.2860) / 0.3530).unsqueeze(1).cuda()


def main():
    data, mode = sys.argv[1], sys.argv[2]
    epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    bf16 = mode == "bf16"
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    x = images(os.path.join(data, "train-images-idx3-ubyte"))
    y = torch.tensor(idx(os.path.join(data, "train-labels-idx1-ubyte")), dtype=torch.long).cuda()
    tx = images(os.path.join(data, "t10k-images-idx3-ubyte"))
    ty = torch.tensor(idx(os.path.join(data, "t10k-labels-idx1-ubyte")), dtype=torch.long).cuda()
    model = ResNet18(channels=1).cuda()
    if bf16:
        model = model.to(memory_format=torch.channels_last)
        x, tx = x.to(memory_format=torch.channels_last), tx.to(memory_format=torch.channels_last)
    lr0, lr1, batch = 0.05, 5e-4, 128
    opt = torch.optim.SGD(model.parameters(), lr=lr0, momentum=0.9, weight_decay=5e-4)
    losses, start = [], time.time()
    for e in range(epochs):
        lr = lr1 + (lr0 - lr1) * (1 + math.cos(math.pi * e / max(epochs - 1, 1))) / 2
        for g in opt.param_groups:
            g["lr"] = lr
        model.train()
        order = torch.randperm(x.shape[0], device="cuda")
        total = torch.zeros((), device="cuda")
        steps = x.shape[0] // batch
        for b in range(steps):
            i = order[b * batch:(b + 1) * batch]
            with torch.autocast("cuda", torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(model(x[i]), y[i])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach().float()
        losses.append(round(total.item() / steps, 4))
    torch.cuda.synchronize()
    seconds = time.time() - start
    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=bf16):
        for b in range(0, tx.shape[0], 1000):
            correct += (model(tx[b:b + 1000]).argmax(1) == ty[b:b + 1000]).sum().item()
    print(json.dumps({"mode": mode, "epochs": epochs, "epoch_losses": losses,
                      "test_accuracy": correct / tx.shape[0], "train_seconds": round(seconds, 1),
                      "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
