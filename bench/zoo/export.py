"""Exports torchvision's image classifiers (random weights) to ONNX for `make zoo`.

Run with Debian's python3-torch (1.13) and python3-torchvision (0.14):
    /usr/bin/python3 export.py OUT_DIR IMAGES_DIR [NAME ...]
For each model it writes OUT_DIR/NAME.onnx (eval mode, opset 13, a dynamic
batch axis), the batch it ran (NAME.x.npy: 32 crops of the photographs in
IMAGES_DIR, which `make data` fetches from Debian's scikit-image and
scikit-learn, normalised as torchvision's ImageNet models expect) and
PyTorch's output for it (NAME.y.npy), float32 both. bench/zoo/run.sh
imports each model, compiles it and compares.
"""
import os
import sys
import time

import numpy as np
import torch
import torchvision
from PIL import Image

# The models issue #24 names, in the order the table lists them.
MODELS = [
    "resnet18", "resnet50", "vgg11", "densenet121", "efficientnet_b0",
    "mobilenet_v2", "shufflenet_v2_x1_0", "googlenet", "regnet_y_400mf",
    "mnasnet1_0", "alexnet", "squeezenet1_0",
]
PHOTOS = ["chelsea.png", "china.jpg", "coffee.png", "flower.jpg", "hubble_deep_field.jpg", "rocket.jpg"]
BATCH = 32


def batch(images_dir):
    """32 224×224 crops at several scales of the photographs, normalised."""
    mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
    std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    out = []
    k = 0
    while len(out) < BATCH:
        img = Image.open(os.path.join(images_dir, PHOTOS[k % len(PHOTOS)])).convert("RGB")
        scale = 224 + 32 * (k // len(PHOTOS))
        w, h = img.size
        s = scale / min(w, h)
        img = img.resize((max(224, round(w * s)), max(224, round(h * s))), Image.BILINEAR)
        w, h = img.size
        left, top = (w - 224) * (k % 3) // 2, (h - 224) * (k % 2)
        a = np.asarray(img.crop((left, top, left + 224, top + 224)), np.float32) / 255
        out.append((a.transpose(2, 0, 1) - mean) / std)
        k += 1
    return np.stack(out).astype(np.float32)


def calibrate(model, x):
    """Sets every batch norm's running statistics to the photographs' own
    (a cumulative average over two passes in training mode), then puts the
    model in eval mode. With torchvision's initial statistics (mean 0,
    variance 1) the random network's outputs shrink layer by layer to
    1e-9 or less, where an absolute tolerance tests nothing."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.from_numpy(x))
    model.eval()


def main():
    out_dir, images_dir = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or MODELS
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    x = batch(images_dir)
    for name in names:
        torch.manual_seed(0)
        kwargs = {"weights": None}
        if name == "googlenet":
            kwargs.update(aux_logits=False, init_weights=True)
        model = getattr(torchvision.models, name)(**kwargs)
        calibrate(model, x)
        path = os.path.join(out_dir, name + ".onnx")
        t0 = time.time()
        with torch.no_grad():
            y = model(torch.from_numpy(x)).numpy()
            extra = {}
            if int(torch.__version__.split(".")[0]) >= 2:
                extra["dynamo"] = False  # the TorchScript exporter, as 1.13 has it (2.9 made dynamo the default)
            torch.onnx.export(model, torch.from_numpy(x[:1]), path, opset_version=13,
                              input_names=["x"], output_names=["y"],
                              dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, **extra)
        np.save(os.path.join(out_dir, name + ".x.npy"), x)
        np.save(os.path.join(out_dir, name + ".y.npy"), y.astype(np.float32))
        params = sum(p.numel() for p in model.parameters())
        print(f"{name}: {params} parameters, output {list(y.shape)}, largest |output| {np.abs(y).max():.3g}, {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
