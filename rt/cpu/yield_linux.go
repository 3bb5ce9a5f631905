package cpu

import "syscall"

// osYield gives the core to another thread that is ready to run on it, if
// any (sched_yield): a goroutine polling for work must not hold a core that
// the thread it waits for shares with it when another process takes the
// other cores.
func osYield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
