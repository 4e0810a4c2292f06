package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// parseFlags parses args with fs, turning every problem (unknown flag,
// missing value, stray argument) into a one-line usage error.
func parseFlags(fs *flag.FlagSet, args []string, allowArgs bool) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			fmt.Fprintf(&b, "usage of dpproxy %s:\n", fs.Name())
			fs.SetOutput(&b)
			fs.PrintDefaults()
			return helpText{b.String()}
		}
		return usagef("%s: %s", fs.Name(), strings.TrimSpace(err.Error()))
	}
	if !allowArgs && fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// helpText is -h or --help of a command: its flags, printed on stdout with
// exit status 0 (run).
type helpText struct{ text string }

func (h helpText) Error() string { return h.text }

// optDuration is a duration flag that tells "not given" apart from 0s, and
// shows no default in -help.
type optDuration struct {
	d   time.Duration
	set bool
}

func (o *optDuration) String() string {
	if o == nil || !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want a duration like 500ms or 0s")
	}
	o.d, o.set = d, true
	return nil
}
