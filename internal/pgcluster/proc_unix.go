//go:build unix

package pgcluster

import (
	"fmt"
	"strings"

	"go.uber.org/zap"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
)

var (
	sigInt  os.Signal = syscall.SIGINT  // fast shutdown
	sigQuit os.Signal = syscall.SIGQUIT // immediate shutdown
)

// credential is the unprivileged user the server runs as when we are root.
type credential struct {
	name     string
	uid, gid uint32
}

// serverUser is the system user that runs the server when we are root.
const serverUser = "postgres"

// serverCredential returns nil when not root (the server runs as us), else
// the "postgres" system user, created with useradd if it does not exist.
// PostgreSQL refuses to run as root.
func serverCredential() (*credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		var unknown user.UnknownUserError
		if !asUnknownUser(err, &unknown) {
			return nil, fmt.Errorf("look up user %s: %w", serverUser, err)
		}
		out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/var/lib/postgresql", "--shell", "/bin/sh", serverUser).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL cannot run as root and user %q does not exist; creating it with useradd failed: %v: %s (create it with: useradd --system --user-group postgres)", serverUser, err, out)
		}
		if u, err = user.Lookup(serverUser); err != nil {
			return nil, fmt.Errorf("look up user %s after useradd: %w", serverUser, err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %s has a non-numeric uid/gid", serverUser)
	}
	return &credential{name: serverUser, uid: uint32(uid), gid: uint32(gid)}, nil
}

func asUnknownUser(err error, target *user.UnknownUserError) bool {
	u, ok := err.(user.UnknownUserError)
	if ok {
		*target = u
	}
	return ok
}

// apply makes cmd run as the credential's user (no supplementary groups).
func (c *credential) apply(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if c == nil {
		return
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: c.uid, Gid: c.gid, Groups: []uint32{}}
}

// chown gives path to the credential's user.
func (c *credential) chown(path string) error {
	if c == nil {
		return nil
	}
	if err := os.Chown(path, int(c.uid), int(c.gid)); err != nil {
		return fmt.Errorf("chown %s to %s: %w", path, c.name, err)
	}
	return nil
}

// accessHint explains a likely permission problem when running as root.
func (c *credential) accessHint(dir string) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("\n(the server runs as user %q, which must be able to enter every directory above %s; choose a --data-dir under /tmp or /var/lib/postgresql if it cannot)", c.name, filepath.Clean(dir))
}

// detach puts the server in its own process group (a Ctrl-C on the terminal
// reaches us, and we stop the server in order) and asks the kernel to send it
// SIGINT (fast shutdown) if we die without stopping it.
func detach(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if runtime.GOOS == "linux" {
		setPdeathsig(cmd.SysProcAttr)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// ensureReachable checks that the server user can enter dir and every
// directory above it (PostgreSQL needs to reach its data directory by path).
// Directories under the system temporary directory that it cannot enter (a
// root-owned os.MkdirTemp is 0700) get search permission for others (o+x,
// not read); anywhere else the error gives the command to run.
func (c *credential) ensureReachable(dir string, log *zap.Logger) error {
	if c == nil {
		return nil
	}
	if log == nil {
		log = zap.NewNop()
	}
	tmp := filepath.Clean(os.TempDir())
	var blocked []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if !c.canSearch(st) {
			if strings.HasPrefix(d, tmp+string(filepath.Separator)) {
				if err := os.Chmod(d, st.Mode().Perm()|0o001); err != nil {
					return fmt.Errorf("give user %s access to %s: %w", c.name, d, err)
				}
				log.Warn("granted search permission (o+x) on a temporary directory so the postgres user can reach its data directory", zap.String("dir", d))
			} else {
				blocked = append(blocked, d)
			}
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if len(blocked) > 0 {
		return fmt.Errorf("the PostgreSQL server runs as user %q (it refuses to run as root), which cannot enter %s; choose a --data-dir it can reach (e.g. under /tmp or /var/lib/postgresql) or allow it with: chmod o+x %s",
			c.name, strings.Join(blocked, ", "), strings.Join(blocked, " "))
	}
	return nil
}

// canSearch reports whether the server user (no supplementary groups) may
// enter the directory.
func (c *credential) canSearch(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	m := st.Mode().Perm()
	switch {
	case sys.Uid == c.uid:
		return m&0o100 != 0
	case sys.Gid == c.gid:
		return m&0o010 != 0
	default:
		return m&0o001 != 0
	}
}
