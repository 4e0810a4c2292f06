package main

import (
	"flag"
	"io"
	"strings"
)

// parseFlags parses args with fs, turning every problem (unknown flag,
// missing value, stray argument) into a one-line usage error.
func parseFlags(fs *flag.FlagSet, args []string, allowArgs bool) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		return usagef("%s: %s", fs.Name(), strings.TrimSpace(err.Error()))
	}
	if !allowArgs && fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
