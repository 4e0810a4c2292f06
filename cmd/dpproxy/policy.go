package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dpproxy/dpproxy/policy"
)

// cmdPolicyValidate prints "FILE: ok" for each valid policy file (or
// directory of them) and the problems of the others, as file:line: message.
func cmdPolicyValidate(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("policy validate: name at least one policy file")
	}
	failed := false
	for _, p := range args {
		var err error
		if st, serr := os.Stat(p); serr == nil && st.IsDir() {
			_, err = policy.LoadDir(p)
		} else {
			_, err = policy.Load(p)
		}
		if err == nil {
			fmt.Fprintf(stdout, "%s: ok\n", p)
			continue
		}
		failed = true
		var pe policy.Errors
		if errors.As(err, &pe) {
			for _, e := range pe {
				fmt.Fprintln(stderr, e.Error())
			}
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", p, err)
		}
	}
	if failed {
		return errSilent
	}
	return nil
}
