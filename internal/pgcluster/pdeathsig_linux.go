package pgcluster

import "syscall"

// setPdeathsig: the kernel sends SIGINT to the server when the thread that
// started it exits. Go keeps its threads for the life of the process unless
// a goroutine locked to one exits, so in practice this fires when we die.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGINT }
