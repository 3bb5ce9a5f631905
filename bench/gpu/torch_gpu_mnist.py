# PyTorch on one NVIDIA GPU, the fair reference for mlbuild's CUDA backend (the project's
# shared/bench/torch_gpu_mnist.py, extended to LeNet-5 and to inference latency):
# MNIST, batch 250, fp32 with TF32 off, Adam 1e-3, data resident on the GPU, eager and
# torch.compile(mode="reduce-overhead") (CUDA graphs). The first compiled epoch includes
# compilation and is reported separately (first_epoch_s); epoch_s lists the later ones.
# Usage: python3 torch_gpu_mnist.py DIR_WITH_MNIST_GZ [EPOCHS] [MODELS]
#   MODELS: comma-separated of flagship (models/mnist.cue), lenet5, mlp (default: all).
# Prints one JSON object per (model, mode).
import gzip, struct, time, sys, json
import numpy as np, torch, torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
D = sys.argv[1]
EPOCHS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
MODELS = sys.argv[3].split(',') if len(sys.argv) > 3 else ['flagship', 'lenet5', 'mlp']
B = 250

def idx(path):
    with gzip.open(path, 'rb') as f: b = f.read()
    magic, n = struct.unpack('>II', b[:8])
    if magic == 2051:
        r, c = struct.unpack('>II', b[8:16]); return np.frombuffer(b[16:], np.uint8).reshape(n, 1, r, c)
    return np.frombuffer(b[8:], np.uint8)
Xtr = torch.tensor(idx(f'{D}/train-images-idx3-ubyte.gz'), dtype=torch.float32).div_(255).cuda()
Ytr = torch.tensor(idx(f'{D}/train-labels-idx1-ubyte.gz'), dtype=torch.long).cuda()
Xte = torch.tensor(idx(f'{D}/t10k-images-idx3-ubyte.gz'), dtype=torch.float32).div_(255).cuda()
Yte = torch.tensor(idx(f'{D}/t10k-labels-idx1-ubyte.gz'), dtype=torch.long).cuda()

def arch(name):
    if name == 'flagship': return nn.Sequential(nn.Conv2d(1,32,5,padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32,64,5,padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(3136,128), nn.ReLU(), nn.Linear(128,10))
    if name == 'lenet5': return nn.Sequential(nn.Conv2d(1,6,5,padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6,16,5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400,120), nn.ReLU(), nn.Linear(120,84), nn.ReLU(), nn.Linear(84,10))
    if name == 'mlp': return nn.Sequential(nn.Flatten(), nn.Linear(784,512), nn.ReLU(), nn.Linear(512,256), nn.ReLU(), nn.Linear(256,10))
    raise SystemExit(f'unknown model {name}')

def acc(m):
    m.eval(); c = 0
    with torch.no_grad():
        for i in range(0, 10000, B): c += (m(Xte[i:i+B]).argmax(1) == Yte[i:i+B]).sum().item()
    m.train(); return c / 100.0

def median_ms(f, iters=50):
    for _ in range(5): f()
    torch.cuda.synchronize(); ts = []
    for _ in range(iters):
        t = time.perf_counter(); f(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1e3)
    ts.sort(); return ts[len(ts) // 2]

for name in MODELS:
    for mode in ['eager', 'compiled']:
        torch.manual_seed(0); m = arch(name).cuda(); opt = torch.optim.Adam(m.parameters(), lr=1e-3, capturable=(mode=='compiled')); lossf = nn.CrossEntropyLoss()
        def step(x, y):
            opt.zero_grad(set_to_none=True); loss = lossf(m(x), y); loss.backward(); opt.step(); return loss
        f = torch.compile(step, mode='reduce-overhead') if mode == 'compiled' else step
        g = torch.Generator(device='cuda'); g.manual_seed(0)
        times, accs = [], []
        t0 = time.perf_counter()
        try:
            for e in range(EPOCHS):
                torch.cuda.synchronize(); t = time.perf_counter()
                perm = torch.randperm(60000, device='cuda', generator=g)
                for i in range(0, 60000, B):
                    j = perm[i:i+B]; f(Xtr[j], Ytr[j])
                torch.cuda.synchronize(); times.append(time.perf_counter() - t); accs.append(acc(m))
            m.eval()
            x = Xte[:B].clone(); x1 = Xte[:1].clone()
            with torch.no_grad():
                fwd = torch.compile(m, mode='reduce-overhead') if mode == 'compiled' else m
                infer_ms = median_ms(lambda: fwd(x))
                infer1_ms = median_ms(lambda: fwd(x1))
                # host to host, as a program serving requests from host memory
                # sees it (and as mlbuild's bench measures): input up, output back
                xh, x1h = x.cpu(), x1.cpu()
                infer_host_ms = median_ms(lambda: fwd(xh.cuda()).cpu())
                infer1_host_ms = median_ms(lambda: fwd(x1h.cuda()).cpu())
        except Exception as ex:
            print(json.dumps(dict(model=name, mode=mode, failed=repr(ex)[:300])), flush=True); continue
        first, rest = times[0], times[1:] or times
        print(json.dumps(dict(model=name, mode=mode, first_epoch_s=round(first, 3), epoch_s=[round(v, 3) for v in rest],
                              median_epoch_s=round(sorted(rest)[len(rest)//2], 4), acc=accs,
                              infer_batch_ms=round(infer_ms, 4), infer_one_ms=round(infer1_ms, 4),
                              infer_batch_host_ms=round(infer_host_ms, 4), infer_one_host_ms=round(infer1_host_ms, 4),
                              total_s=round(time.perf_counter()-t0, 2))), flush=True)
print(json.dumps(dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(0))), flush=True)
