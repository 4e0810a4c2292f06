package doctor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/config"
)

// The proxy bounds what each analyst's sessions keep in its memory
// (max_memory_per_analyst_mb), not what all analysts keep together: one
// analyst's statements must not take another's room. So the machine must
// have room for every analyst at their bound, or one analyst at theirs,
// with the others' ordinary use, could have the kernel end the proxy and
// every analyst's sessions with it. Go's collector lets the heap grow to
// about twice what is live before it runs (GOGC=100), so the check asks
// for twice the sum.

// MemoryLimit returns the memory this process may use and where that figure
// comes from: its cgroup's limit (memory.max of cgroup v2,
// memory.limit_in_bytes of v1) when one is set and below the machine's
// MemTotal, else MemTotal; 0 when neither can be read.
func MemoryLimit() (int64, string) { return memoryLimitAt("/") }

// noLimit is above any cgroup v1 limit that means "none"
// (9223372036854771712, the largest page-aligned int64).
const noLimit = 1 << 62

func memoryLimitAt(root string) (int64, string) {
	limit, source := memTotal(filepath.Join(root, "proc/meminfo")), "MemTotal in /proc/meminfo"
	for _, file := range cgroupLimitFiles(root) {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= noLimit { // "max": no limit
			continue
		}
		if limit == 0 || n < limit {
			limit, source = n, strings.TrimPrefix(file, filepath.Clean(root))
		}
	}
	return limit, source
}

// cgroupLimitFiles lists where this process's cgroup memory limits may be
// read: its own cgroup's (from /proc/self/cgroup) and each ancestor's (a
// systemd slice, a pod), whose limits bind it too, then the root of the
// mounted hierarchy (a container's own view). The smallest applies.
func cgroupLimitFiles(root string) []string {
	fs := filepath.Join(root, "sys/fs/cgroup")
	var files []string
	if f, err := os.Open(filepath.Join(root, "proc/self/cgroup")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// hierarchy-ID:controllers:path
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 || parts[2] == "/" {
				continue
			}
			dir, name := "", ""
			switch {
			case parts[0] == "0" && parts[1] == "":
				dir, name = fs, "memory.max"
			case parts[1] == "memory":
				dir, name = filepath.Join(fs, "memory"), "memory.limit_in_bytes"
			default:
				continue
			}
			for p := parts[2]; p != "/" && p != "." && p != ""; p = filepath.Dir(p) {
				files = append(files, filepath.Join(dir, p, name))
			}
		}
		f.Close()
	}
	return append(files, filepath.Join(fs, "memory.max"), filepath.Join(fs, "memory", "memory.limit_in_bytes"))
}

// memTotal reads MemTotal (kB) from a meminfo file, in bytes; 0 if absent.
func memTotal(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// MemoryFinding says whether every analyst at their memory bound fits in
// limit (from MemoryLimit), twice over for the collector.
func MemoryFinding(cfg *config.Config, limit int64, source string) Finding {
	per := int64(cfg.MaxMemoryPerAnalystMB) << 20
	analysts := int64(len(cfg.Analysts))
	need := 2 * analysts * per
	switch {
	case limit <= 0:
		return Finding{OK: false, Message: fmt.Sprintf("could not read this machine's memory (cgroup or /proc/meminfo): the %d analysts at max_memory_per_analyst_mb (%d) may keep %d MiB in the proxy; give it twice that", analysts, per>>20, analysts*per>>20)}
	case need > limit:
		fit := max(limit/2/max(analysts, 1)>>20, 1)
		return Finding{OK: false, Message: fmt.Sprintf("the %d analysts at max_memory_per_analyst_mb (%d) may keep %d MiB in the proxy, and Go's collector may need twice that, but this process may use %d MiB (%s): one analyst's large answers could then have the proxy killed for everyone; set max_memory_per_analyst_mb to at most %d, or give the proxy more memory",
			analysts, per>>20, analysts*per>>20, limit>>20, source, fit)}
	default:
		return Finding{OK: true, Message: fmt.Sprintf("the %d analysts at max_memory_per_analyst_mb (%d) fit twice over in the %d MiB this process may use (%s)", analysts, per>>20, limit>>20, source)}
	}
}
