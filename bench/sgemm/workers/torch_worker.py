"""torch_worker times torch.mm for bench/sgemm (run it with Debian's
/usr/bin/python3, whose python3-torch this is). It reads "n iters" lines on
stdin and prints the seconds iters products took, after one untimed warm-up.
The thread count comes from SGEMM_THREADS (set explicitly: torch defaults to
one thread on these machines); the banner names the BLAS libraries the
process mapped, read from /proc/self/maps."""
import os
import sys
import time

import torch


def loaded_blas():
    seen = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line[line.find("/"):].strip() if "/" in line else ""
            if ("blas" in path or "mkl" in path) and path not in seen:
                seen.append(path)
    return " ".join(seen) or "none found"


def main():
    threads = int(os.environ.get("SGEMM_THREADS", "1"))
    torch.set_num_threads(threads)
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__} threads={torch.get_num_threads()} loaded: {loaded_blas()}", flush=True)
    cached, a, b, c = 0, None, None, None
    for line in sys.stdin:
        n, iters = map(int, line.split())
        if n != cached:
            g = torch.Generator().manual_seed(n)
            a = torch.rand(n, n, generator=g) * 2 - 1
            b = torch.rand(n, n, generator=g) * 2 - 1
            c = torch.empty(n, n)
            cached = n
        torch.mm(a, b, out=c)
        start = time.perf_counter()
        for _ in range(iters):
            torch.mm(a, b, out=c)
        print(f"{time.perf_counter() - start:.9f}", flush=True)


if __name__ == "__main__":
    main()
