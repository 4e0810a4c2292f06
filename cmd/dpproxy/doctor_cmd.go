package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/doctor"
	"github.com/dpproxy/dpproxy/policy"
)

// cmdDoctor is `dpproxy doctor --config FILE`: check the live privileges
// of the data, ledger and shadow roles (internal/doctor). It prints one
// line per check and exits 1 when any check warns.
func cmdDoctor(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (dpproxy.yaml)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *path == "" {
		return usagef("doctor: --config FILE is required")
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	list, err := loadPolicies(cfg)
	if err != nil {
		return err
	}
	policies := map[string]*policy.Dataset{}
	for _, ds := range list {
		policies[ds.Name] = ds
	}
	rep, err := doctor.Check(ctx, cfg, policies)
	if err != nil {
		return err
	}
	for _, f := range rep.Findings {
		fmt.Fprintln(stdout, f)
	}
	errs, warns := rep.Errors(), rep.Warnings()
	if errs > 0 {
		fmt.Fprintf(stdout, "%s: dpproxy will not start with this config, policy and database (fix each ERROR above)\n", plural(errs, "error"))
	}
	if warns > 0 {
		fmt.Fprintf(stdout, "%s: settings or privileges broader than dpproxy needs, or that leak time (each WARNING above says how to narrow it; SECURITY.md, Least privilege)\n", plural(warns, "warning"))
	}
	if errs+warns > 0 {
		return errSilent
	}
	fmt.Fprintf(stdout, "ok: %d checks passed\n", len(rep.Findings))
	return nil
}

// plural is "1 error", "2 errors".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
