//go:build unix && !linux

package pgcluster

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
