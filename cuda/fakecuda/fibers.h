// fibers.h: fibers for the shims' lanes (cuda/fakecuda/shim.h, which
// fakecuda carries into every program, and emit/gpu's test shims): mlb_fiber_run runs one threadgroup's lanes
// as fibers (ucontexts with stacks of their own) on the calling thread,
// and mlb_fiber_yield, which the shims' barriers call, switches back to
// it, so that it runs the next lane up to its barrier: every lane reaches
// a barrier before any passes it. One OS thread a lane meeting at a
// std::barrier cost more in futex waits and context switches than the
// kernels' work on a machine of few cores.
#ifndef MLBUILD_FIBERS
#define MLBUILD_FIBERS
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <functional>
#include <sys/mman.h>
#include <ucontext.h>
#include <vector>

struct mlb_fibers {
    ucontext_t main;               // mlb_fiber_run's
    std::vector<ucontext_t> lanes; // each lane's, while it waits at a barrier
    std::vector<char> done;        // whether each lane has returned
    int cur = 0;                   // the lane running
    char* stacks = nullptr;        // mapped lanes × mlb_fiber_stack bytes
    int mapped = 0;
    std::function<void(int)> lane; // the group's body for lane cur
};
inline thread_local mlb_fibers mlb_fib;
// mlb_fiber_stack is a lane's stack; its pages are touched only as used.
constexpr std::size_t mlb_fiber_stack = 256 << 10;

inline void mlb_fiber_yield() { swapcontext(&mlb_fib.lanes[mlb_fib.cur], &mlb_fib.main); }

inline void mlb_fiber_start() {
    mlb_fib.lane(mlb_fib.cur);
    mlb_fib.done[mlb_fib.cur] = 1; // then back to mlb_fiber_run through uc_link
}

// mlb_fiber_run runs lane(l) for l < n, each as a fiber, until all return.
inline void mlb_fiber_run(int n, std::function<void(int)> lane) {
    mlb_fibers& f = mlb_fib;
    if (f.mapped < n) {
        if (f.stacks) munmap(f.stacks, std::size_t(f.mapped) * mlb_fiber_stack);
        void* m = mmap(nullptr, std::size_t(n) * mlb_fiber_stack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) std::abort();
        f.stacks = static_cast<char*>(m);
        f.mapped = n;
    }
    f.lane = std::move(lane);
    f.lanes.assign(n, ucontext_t{});
    f.done.assign(n, 0);
    for (int l = 0; l < n; l++) {
        ucontext_t& c = f.lanes[l];
        getcontext(&c);
        c.uc_stack.ss_sp = f.stacks + std::size_t(l) * mlb_fiber_stack;
        c.uc_stack.ss_size = mlb_fiber_stack;
        c.uc_link = &f.main;
        makecontext(&c, mlb_fiber_start, 0);
    }
    for (int live = n; live > 0;) { // rounds: each lane up to its next barrier
        live = 0;
        for (int l = 0; l < n; l++) {
            if (f.done[l]) continue;
            f.cur = l;
            swapcontext(&f.main, &f.lanes[l]);
            if (!f.done[l]) live++;
        }
    }
}
#endif
