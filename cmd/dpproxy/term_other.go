//go:build !linux

package main

import (
	"errors"
	"io"
	"os"
)

func isTerminal(*os.File) bool { return false }

func readNoEcho(*os.File, io.Writer, string) (string, error) {
	return "", errors.New("no terminal support; pipe the password on stdin")
}
