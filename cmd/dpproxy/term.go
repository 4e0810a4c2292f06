package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// readNoEcho prints prompt on w and reads one line from the terminal f with
// echo off (golang.org/x/term).
func readNoEcho(f *os.File, w io.Writer, prompt string) (string, error) {
	fmt.Fprint(w, prompt)
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(w)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
