//go:build unix

package pgcluster

import (
	"fmt"
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
