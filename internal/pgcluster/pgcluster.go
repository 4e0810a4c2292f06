// Package pgcluster runs a throwaway PostgreSQL cluster from the local
// PostgreSQL binaries, for `dpproxy demo` and the tests.
//
// The server listens on 127.0.0.1 only, with trust authentication for the
// bootstrap superuser "postgres" (and every other role) from loopback and the
// cluster's own Unix socket. That is fit for a demo and for tests, never for
// production data.
//
// Layout of Options.Dir (the "data directory parent"):
//
//	Dir/pgdata/          the PostgreSQL data directory (initdb)
//	Dir/pgdata/dpproxy.conf   port and sockets of the current run (rewritten on each start)
//	Dir/postgres.log     the server's log
//
// When the process runs as root, initdb and postgres run as the unprivileged
// "postgres" system user (created with useradd if it does not exist), and
// Dir/pgdata is owned by it. The server process is a direct child of this
// process, in its own process group, and is sent SIGINT (fast shutdown) if
// this process dies, so a crashed test binary does not leave a server behind.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// InstallHint is the exact command that installs the PostgreSQL server
// binaries on Debian and Ubuntu.
const InstallHint = "install the PostgreSQL server binaries: apt-get install -y postgresql (as root) or sudo apt-get install -y postgresql"

// InCI reports whether the environment says it is a CI run: CI=true or
// CI=1 (any case), as CI services set it. There, tests that need
// PostgreSQL, psql or a client fail instead of skipping (internal/pgtest,
// integration/). Every CI check of the project goes through this function.
func InCI() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v == "true" || v == "1"
}

// ErrNotInstalled is wrapped by Start's error when no PostgreSQL server
// binaries were found.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH or under /usr/lib/postgresql/*/bin")

// Options configures Start.
type Options struct {
	// Dir is the cluster's data directory parent. Empty means a new
	// temporary directory, removed by Stop; an explicit one is kept and
	// reused (an existing cluster in it is started again, not re-created).
	Dir string
	// Port to listen on (127.0.0.1); 0 picks a free one.
	Port   int
	Logger *zap.Logger
	// BinDir, when set, is where initdb, pg_ctl and postgres are; otherwise
	// they are looked up as FindBinDir does.
	BinDir string
	// NoFsync runs the server with fsync=off, synchronous_commit=off and
	// full_page_writes=off: faster, and a crash may corrupt the cluster.
	// For throwaway test clusters only.
	NoFsync bool
	// StartTimeout bounds the wait for the server to accept connections
	// (default 60s).
	StartTimeout time.Duration
	// Settings are extra server settings for this run, written to
	// dpproxy.conf as name = 'value' (e.g. shared_preload_libraries =
	// citus). Values are quoted here; names must be plain identifiers.
	Settings map[string]string
	// MaxProcessMemory, when set, bounds the address space of the server
	// and of every backend it forks (RLIMIT_AS, inherited at fork; shared
	// memory counts): a statement that needs more fails with 53200 "out of
	// memory" in its own backend, where without a bound the kernel's OOM
	// killer would end a backend and PostgreSQL would restart, dropping
	// every session. For a shadow catalog cluster, whose statements come
	// from analysts.
	MaxProcessMemory int64
}

// Cluster is a running PostgreSQL server on 127.0.0.1. Safe for concurrent
// use.
type Cluster struct {
	Host    string // "127.0.0.1"
	Port    int
	Dir     string // data directory parent
	BinDir  string // where initdb/pg_ctl/postgres were found
	Version int    // major version, e.g. 15
	// Superuser is the bootstrap superuser name ("postgres"); it connects
	// without a password over loopback (trust), as in the demo.
	Superuser string

	password string // for clusters not started here (see External)
	dataDir  string
	temp     bool
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the server process has exited
	cred     *credential   // non-nil when the server runs as another user
	logger   *zap.Logger

	stopOnce sync.Once
	stopErr  error
}

// External describes an already running server reachable with the given
// superuser DSN (e.g. DPPROXY_TEST_DATABASE). Its Stop does nothing.
func External(dsn string) (*Cluster, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse DSN: %w", err)
	}
	return &Cluster{Host: cfg.Host, Port: int(cfg.Port), Superuser: cfg.User, password: cfg.Password}, nil
}

// DataDir returns the PostgreSQL data directory (Dir/pgdata); empty for an
// external cluster.
func (c *Cluster) DataDir() string { return c.dataDir }

// DSN returns a superuser DSN for the database.
func (c *Cluster) DSN(database string) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), Path: "/" + database}
	if c.password != "" {
		u.User = url.UserPassword(c.Superuser, c.password)
	} else {
		u.User = url.User(c.Superuser)
	}
	u.RawQuery = "sslmode=disable"
	return u.String()
}

// RoleDSN returns a DSN for another role of the cluster, with an optional
// password.
func (c *Cluster) RoleDSN(role, password, database string) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(c.Host, strconv.Itoa(c.Port)), Path: "/" + database}
	if password != "" {
		u.User = url.UserPassword(role, password)
	} else {
		u.User = url.User(role)
	}
	u.RawQuery = "sslmode=disable"
	return u.String()
}

// Start starts (and if needed creates) a cluster. When run as root, the
// server runs as the unprivileged "postgres" system user.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	bin := opts.BinDir
	if bin == "" {
		var err error
		if bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	version, err := serverVersion(ctx, bin)
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}

	c := &Cluster{Host: "127.0.0.1", BinDir: bin, Version: version, Superuser: "postgres", cred: cred, logger: log.Named("pgcluster")}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "dpproxy-pg-")
		if err != nil {
			return nil, fmt.Errorf("create temporary directory: %w", err)
		}
		c.Dir, c.temp = d, true
	} else {
		d, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create data directory parent: %w", err)
		}
		c.Dir = d
	}
	fail := func(err error) (*Cluster, error) {
		if c.temp {
			os.RemoveAll(c.Dir)
		}
		return nil, err
	}
	if cred != nil {
		// The unprivileged server user must be able to reach its data
		// directory; the parent stays owned by us.
		if err := os.Chmod(c.Dir, 0o755); err != nil && c.temp {
			return fail(err)
		}
	}
	c.dataDir = filepath.Join(c.Dir, "pgdata")
	if err := c.cred.ensureReachable(c.Dir, c.logger); err != nil {
		return fail(err)
	}

	if err := c.initIfNeeded(ctx); err != nil {
		return fail(err)
	}

	port := opts.Port
	for attempt := 0; ; attempt++ {
		p := port
		if p == 0 {
			if p, err = freePort(); err != nil {
				return fail(err)
			}
		}
		err = c.start(ctx, p, opts)
		if err == nil {
			break
		}
		if port != 0 || attempt >= 2 || !errors.Is(err, errPortInUse) {
			return fail(err)
		}
	}
	c.logger.Info("postgres started", zap.String("dir", c.Dir), zap.Int("port", c.Port), zap.Int("version", c.Version))
	return c, nil
}

var errPortInUse = errors.New("address already in use")

// settingName is what Options.Settings accepts as a setting's name
// (including a dotted extension prefix, e.g. citus.shard_count).
var settingName = regexp.MustCompile(`^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$`)

// testOnlyVersionedBinGlob is where Debian's packages put the server
// binaries; tests point it elsewhere.
var testOnlyVersionedBinGlob = "/usr/lib/postgresql/*/bin"

// initIfNeeded runs initdb unless Dir/pgdata already holds a cluster.
func (c *Cluster) initIfNeeded(ctx context.Context) error {
	pv, err := os.ReadFile(filepath.Join(c.dataDir, "PG_VERSION"))
	if err == nil {
		v, _ := strconv.Atoi(strings.TrimSpace(string(pv)))
		if v != c.Version {
			return fmt.Errorf("%s holds a PostgreSQL %s cluster but the binaries in %s are version %d; use another --data-dir or the matching binaries", c.dataDir, strings.TrimSpace(string(pv)), c.BinDir, c.Version)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", filepath.Join(c.dataDir, "PG_VERSION"), err)
	}
	if entries, _ := os.ReadDir(c.dataDir); len(entries) > 0 {
		return fmt.Errorf("%s exists, is not empty and holds no PostgreSQL cluster; remove it or choose another --data-dir", c.dataDir)
	}
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if err := c.cred.chown(c.dataDir); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "initdb"),
		"-D", c.dataDir, "-U", c.Superuser, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions")
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	c.cred.apply(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb %s: %w\n%s%s", c.dataDir, err, tail(string(out), 2000), c.cred.accessHint(c.Dir))
	}
	// Settings that must hold for every run live in postgresql.conf; the
	// per-run ones (port, sockets) in dpproxy.conf, rewritten by start.
	f, err := os.OpenFile(filepath.Join(c.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("\n# added by dpproxy (internal/pgcluster)\nlisten_addresses = '127.0.0.1'\ntimezone = 'UTC'\nlog_timezone = 'UTC'\ninclude_if_exists = 'dpproxy.conf'\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// start writes the per-run settings and starts the server on port.
func (c *Cluster) start(ctx context.Context, port int, opts Options) error {
	if pid, running := c.runningPID(); running {
		return fmt.Errorf("a PostgreSQL server (pid %d) is already running in %s; stop it first (%s stop -D %s -m fast)", pid, c.dataDir, filepath.Join(c.BinDir, "pg_ctl"), c.dataDir)
	}
	sockDir := c.dataDir
	if len(sockDir)+len("/.s.PGSQL.65535") > 100 { // sun_path is 108 bytes
		sockDir = ""
	}
	conf := fmt.Sprintf("port = %d\nunix_socket_directories = '%s'\n", port, strings.ReplaceAll(sockDir, "'", "''"))
	if opts.NoFsync {
		conf += "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
	}
	names := make([]string, 0, len(opts.Settings))
	for n := range opts.Settings {
		if !settingName.MatchString(n) {
			return fmt.Errorf("server setting name %q is not a plain identifier", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		conf += fmt.Sprintf("%s = '%s'\n", n, strings.ReplaceAll(opts.Settings[n], "'", "''"))
	}
	confPath := filepath.Join(c.dataDir, "dpproxy.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", confPath, err)
	}
	if err := c.cred.chown(confPath); err != nil {
		return err
	}
	logPath := filepath.Join(c.Dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	logStart, _ := logFile.Seek(0, 2)

	cmd := exec.Command(filepath.Join(c.BinDir, "postgres"), "-D", c.dataDir)
	if opts.MaxProcessMemory > 0 {
		// The shell sets the limit and becomes the server (exec): the
		// process started is still the postmaster.
		cmd = exec.Command("/bin/sh", "-c", `ulimit -v "$1" && exec "$2" -D "$3"`, "sh",
			strconv.FormatInt(opts.MaxProcessMemory>>10, 10), filepath.Join(c.BinDir, "postgres"), c.dataDir)
	}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	c.cred.apply(cmd)
	detach(cmd)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	logFile.Close() // the child holds its own descriptor
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c.cmd, c.exited, c.Port = cmd, exited, port

	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	if err := c.waitReady(ctx, timeout); err != nil {
		c.kill()
		msg := readFrom(logPath, logStart)
		if strings.Contains(msg, "Address already in use") || strings.Contains(msg, "could not create any TCP/IP sockets") {
			return fmt.Errorf("PostgreSQL cannot listen on 127.0.0.1:%d: %w (choose another port, or 0 for a free one)", port, errPortInUse)
		}
		return fmt.Errorf("postgres did not start: %w\n%s%s", err, tail(msg, 2000), c.cred.accessHint(c.Dir))
	}
	return nil
}

// waitReady connects until the server answers a query.
func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		select {
		case <-c.exited:
			return errors.New("the server process exited")
		default:
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, c.DSN("postgres"))
		if err == nil {
			_, err = conn.Exec(cctx, "SELECT 1")
			conn.Close(cctx)
		}
		ccancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", timeout, last)
		case <-c.exited:
			return errors.New("the server process exited")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill stops a server that failed to become ready.
func (c *Cluster) kill() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	c.cmd.Process.Signal(sigQuit)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
	}
}

// runningPID reports whether postmaster.pid names a live process.
func (c *Cluster) runningPID() (int, bool) {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, processAlive(pid)
}

// Stop stops the server (pg_ctl stop -m fast) and removes a temporary
// directory. Calling it again returns the first result; it does nothing on
// an external cluster.
func (c *Cluster) Stop() error {
	if c.cmd == nil {
		return nil
	}
	c.stopOnce.Do(func() {
		cmd := exec.Command(filepath.Join(c.BinDir, "pg_ctl"), "stop", "-D", c.dataDir, "-m", "fast", "-w", "-t", "60")
		c.cred.apply(cmd)
		out, err := cmd.CombinedOutput()
		if err != nil {
			// pg_ctl failed (e.g. the server already died); make sure the
			// process is gone before removing anything.
			c.cmd.Process.Signal(sigInt)
		}
		select {
		case <-c.exited:
		case <-time.After(60 * time.Second):
			c.cmd.Process.Kill()
			<-c.exited
		}
		if err != nil && c.cmd.ProcessState != nil && !c.cmd.ProcessState.Exited() && !c.cmd.ProcessState.Success() {
			c.stopErr = fmt.Errorf("pg_ctl stop: %w: %s", err, strings.TrimSpace(string(out)))
		}
		if c.temp {
			if rerr := os.RemoveAll(c.Dir); rerr != nil && c.stopErr == nil {
				c.stopErr = fmt.Errorf("remove %s: %w", c.Dir, rerr)
			}
		}
		c.logger.Info("postgres stopped", zap.String("dir", c.Dir), zap.Bool("removed", c.temp))
	})
	return c.stopErr
}

// FindBinDir returns the directory holding initdb, pg_ctl and postgres: the
// one of `postgres` on PATH (symlinks resolved), else the newest
// /usr/lib/postgresql/*/bin. The error wraps ErrNotInstalled and says how to
// install them.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if d := filepath.Dir(p); hasServerBinaries(d) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob(testOnlyVersionedBinGlob)
	sort.Slice(dirs, func(i, j int) bool { return dirVersion(dirs[i]) > dirVersion(dirs[j]) })
	for _, d := range dirs {
		if hasServerBinaries(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w; %s", ErrNotInstalled, InstallHint)
}

func dirVersion(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func hasServerBinaries(dir string) bool {
	for _, n := range []string{"initdb", "pg_ctl", "postgres"} {
		st, err := os.Stat(filepath.Join(dir, n))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// serverVersion runs `postgres --version` ("postgres (PostgreSQL) 15.8 …").
func serverVersion(ctx context.Context, bin string) (int, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", filepath.Join(bin, "postgres"), err)
	}
	s := string(out)
	if i := strings.Index(s, ")"); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, fmt.Errorf("cannot read the version from %q", out)
	}
	major, _, _ := strings.Cut(f[0], ".")
	v, err := strconv.Atoi(major)
	if err != nil {
		return 0, fmt.Errorf("cannot read the version from %q", out)
	}
	return v, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func readFrom(path string, off int64) string {
	b, err := os.ReadFile(path)
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
