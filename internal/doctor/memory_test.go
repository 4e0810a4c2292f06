package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/internal/config"
)

// fakeRoot writes files (path relative to the root: content) under a
// temporary directory standing for "/".
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestMemoryLimitAt(t *testing.T) {
	const meminfo = "MemTotal:       24683772 kB\nMemFree:         1000 kB\n"
	const total = int64(24683772) << 10
	for _, tc := range []struct {
		name       string
		files      map[string]string
		want       int64
		wantSource string
	}{
		{"meminfo only", map[string]string{"proc/meminfo": meminfo}, total, "MemTotal in /proc/meminfo"},
		{"cgroup v2 of the process", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "0::/system.slice/dpproxy.service\n",
			"sys/fs/cgroup/system.slice/dpproxy.service/memory.max": "536870912\n",
		}, 512 << 20, "/sys/fs/cgroup/system.slice/dpproxy.service/memory.max"},
		{"cgroup v2 limit on a parent slice", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "0::/analytics.slice/dpproxy.service\n",
			"sys/fs/cgroup/analytics.slice/dpproxy.service/memory.max": "max\n",
			"sys/fs/cgroup/analytics.slice/memory.max":                 "805306368\n",
		}, 768 << 20, "/sys/fs/cgroup/analytics.slice/memory.max"},
		{"cgroup v2 without a limit", map[string]string{
			"proc/meminfo":             meminfo,
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}, total, "MemTotal in /proc/meminfo"},
		{"container's own cgroup v2 root", map[string]string{
			"proc/meminfo":             meminfo,
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "1073741824\n",
		}, 1 << 30, "/sys/fs/cgroup/memory.max"},
		{"cgroup v1 unlimited (this machine's shape)", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "4:memory:/process_api/93f6\n0::/\n",
			"sys/fs/cgroup/memory/process_api/93f6/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                  "9223372036854771712\n",
		}, total, "MemTotal in /proc/meminfo"},
		{"cgroup v1 limited", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "268435456\n",
		}, 256 << 20, "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes"},
		{"a cgroup limit above the machine's memory", map[string]string{
			"proc/meminfo":             "MemTotal: 1024 kB\n",
			"sys/fs/cgroup/memory.max": "1073741824\n",
		}, 1 << 20, "MemTotal in /proc/meminfo"},
		{"nothing readable", map[string]string{}, 0, "MemTotal in /proc/meminfo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, source := memoryLimitAt(fakeRoot(t, tc.files))
			if got != tc.want || source != tc.wantSource {
				t.Errorf("memoryLimitAt = %d (%s), want %d (%s)", got, source, tc.want, tc.wantSource)
			}
		})
	}
}

func TestMemoryFinding(t *testing.T) {
	cfg := &config.Config{MaxMemoryPerAnalystMB: 256, Analysts: map[string]config.Analyst{"alice": {}, "bob": {}, "carol": {}, "dave": {}}}
	// 4 analysts × 256 MiB, twice over: 2 GiB.
	if f := MemoryFinding(cfg, 2<<30, "memory.max"); !f.OK {
		t.Errorf("2 GiB holds 4 × 256 MiB twice over: %s", f)
	}
	f := MemoryFinding(cfg, 2<<30-1, "memory.max")
	if f.OK || f.Error {
		t.Fatalf("a byte short of 2 GiB: want a warning, got %s", f)
	}
	for _, want := range []string{"4 analysts", "1024 MiB", "memory.max", "max_memory_per_analyst_mb to at most 255"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("warning %q does not say %q", f.Message, want)
		}
	}
	if f := MemoryFinding(cfg, 0, ""); f.OK || !strings.Contains(f.Message, "could not read") {
		t.Errorf("unknown memory: want a warning that says so, got %s", f)
	}
}
