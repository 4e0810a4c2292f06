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
// policyValidateUsage is policy validate's --help.
const policyValidateUsage = `usage: dpproxy policy validate FILE|DIR ...

Checks policy files (or every *.yaml of a directory) offline: their keys,
types, bounds, budgets and defaults, with the line of each problem. It does
not read the data database: tables, columns, unit columns and types are
checked against it by dpproxy doctor --config CONFIG, and at start-up.
`

func cmdPolicyValidate(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("policy validate: name at least one policy file")
	}
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fmt.Fprint(stdout, policyValidateUsage)
			return nil
		}
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
			fmt.Fprintf(stdout, "%s: ok (the file only: dpproxy doctor --config checks it against the data database)\n", p)
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
