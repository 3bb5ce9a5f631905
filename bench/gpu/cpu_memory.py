"""Peak resident memory of CIFAR ResNet-18 training on the CPU: mlbuild's
CPU program against PyTorch, each in a process of its own, one after the
other on the same machine and threads.

    python3 cpu_memory.py R18_CPU_PROGRAM [THREADS] [STEPS]

R18_CPU_PROGRAM is bench/models/resnet18_cifar.cue compiled for the CPU
(bench/gpu/session-bundle.sh makes it). mlbuild: its `bench` (training
steps, then inference) at batch 128. PyTorch: the same model (the twin in
torch_resnet_cifar.py), batch 128, SGD momentum 0.9, STEPS training steps
on random data, then inference at batch 128, on the CPU with oneDNN.
Each line is JSON: the process's peak RSS (getrusage of the child, which
counts the libraries it touched: what the machine must have), and, for
PyTorch, the RSS after `import torch` and the model's creation, before the
first step (the share of its peak that is not the training).
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def child_torch(threads, steps):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_resnet_cifar import ResNet18
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = ResNet18()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(128, 3, 32, 32)
    y = torch.randint(0, 10, (128,))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    model.train()
    t0 = time.time()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    step_s = (time.time() - t0) / steps
    model.eval()
    with torch.no_grad():
        model(x)
    print(json.dumps(dict(rss_before_training=before, torch=torch.__version__, train_step_ms=round(step_s * 1e3, 1))), flush=True)


def main():
    if sys.argv[1] == "--torch-child":
        child_torch(int(sys.argv[2]), int(sys.argv[3]))
        return
    prog = sys.argv[1]
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    for name, cmd in [("mlbuild", [prog, "bench", "--threads", str(threads), "--iters", str(steps), "--json"]),
                      ("pytorch", [sys.executable, os.path.abspath(__file__), "--torch-child", str(threads), str(steps)])]:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            p = subprocess.Popen(cmd, stdout=out, stderr=err)
            _, status, usage = os.wait4(p.pid, 0)  # this child's own rusage
            p.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode(), err.read().decode()
        row = dict(what=name, threads=threads, peak_rss_bytes=usage.ru_maxrss * 1024, exit=p.returncode)
        lines = [l for l in stdout.splitlines() if l.startswith("{")]
        if lines:
            row["report"] = json.loads(lines[-1])
        if p.returncode != 0:
            row["stderr"] = stderr[-400:]
        print(json.dumps(row), flush=True)

if __name__ == "__main__":
    main()
