package app

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// systemMemory is the least of MemAvailable in /proc/meminfo, the room
// left under the memory limit of the program's cgroup (v2 or v1, its own
// and its ancestors', counting reclaimable page cache as free) and the room
// left under RLIMIT_AS.
func systemMemory() (bytes int64, source string, ok bool) {
	if kb, found := procField("/proc/meminfo", "MemAvailable:"); found {
		bytes, source, ok = lessMemory(bytes, source, ok, kb<<10, "MemAvailable in /proc/meminfo")
	}
	if b, found := cgroupRoom(); found {
		bytes, source, ok = lessMemory(bytes, source, ok, b, "the memory limit of this process's cgroup")
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil && lim.Cur != ^uint64(0) && lim.Cur < 1<<62 {
		used, _ := procField("/proc/self/status", "VmSize:")
		bytes, source, ok = lessMemory(bytes, source, ok, int64(lim.Cur)-used<<10, "the address-space limit RLIMIT_AS (ulimit -v)")
	}
	return bytes, source, ok
}

// procField reads the number after key in a /proc file of "key value"
// lines (kB for the memory fields).
func procField(file, key string) (int64, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == key {
			n, err := strconv.ParseInt(fields[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// cgroupRoom is the least room under the memory limits of this process's
// cgroup and its ancestors: limit - usage + inactive page cache (which the
// kernel reclaims before it kills). found is false where no limit is set.
func cgroupRoom() (room int64, found bool) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var root, limit, usage, inactive string
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			root, limit, usage, inactive = "/sys/fs/cgroup", "memory.max", "memory.current", "inactive_file"
		case strings.Contains(","+parts[1]+",", ",memory,"): // v1
			root, limit, usage, inactive = "/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
		default:
			continue
		}
		// Inside a container the cgroup's path may not be under the
		// mount it sees: then the mount's root is the cgroup.
		dir := root + strings.TrimSuffix(parts[2], "/")
		if _, err := os.Stat(dir); err != nil {
			dir = root
		}
		for {
			lim, ok1 := fileInt(dir + "/" + limit)
			use, ok2 := fileInt(dir + "/" + usage)
			// v1 writes "no limit" as a huge number near 2^63.
			if ok1 && ok2 && lim < 1<<60 {
				ina, _ := procField(dir+"/memory.stat", inactive)
				if r := lim - use + ina; !found || r < room {
					room, found = r, true
				}
			}
			if len(dir) <= len(root) {
				break
			}
			dir = dir[:strings.LastIndex(dir, "/")]
		}
	}
	return room, found
}

// fileInt reads a file holding one integer ("max" is not one).
func fileInt(file string) (int64, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil
}

// peakRSS is the process's peak resident set (getrusage's ru_maxrss, in
// kilobytes on Linux).
func peakRSS() (int64, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil || ru.Maxrss <= 0 {
		return 0, false
	}
	return int64(ru.Maxrss) << 10, true
}
