package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

func ioctlTermios(fd uintptr, req uint, t *syscall.Termios) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, uintptr(req), uintptr(unsafe.Pointer(t))); errno != 0 {
		return errno
	}
	return nil
}

func isTerminal(f *os.File) bool {
	var t syscall.Termios
	return ioctlTermios(f.Fd(), syscall.TCGETS, &t) == nil
}

// readNoEcho prints prompt on w and reads one line from the terminal f with
// echo off.
func readNoEcho(f *os.File, w io.Writer, prompt string) (string, error) {
	var old syscall.Termios
	if err := ioctlTermios(f.Fd(), syscall.TCGETS, &old); err != nil {
		return "", err
	}
	noEcho := old
	noEcho.Lflag &^= syscall.ECHO
	noEcho.Lflag |= syscall.ICANON | syscall.ECHONL
	if err := ioctlTermios(f.Fd(), syscall.TCSETS, &noEcho); err != nil {
		return "", err
	}
	defer ioctlTermios(f.Fd(), syscall.TCSETS, &old)
	fmt.Fprint(w, prompt)
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}
