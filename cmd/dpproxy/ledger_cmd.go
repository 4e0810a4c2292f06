package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"
)

// cmdLedger is `dpproxy ledger verify --config FILE`: recompute every
// budget row from its charge rows and report any difference (exit 1), and
// the charges left reserved (charged, answer never recorded: a crash or a
// failed upstream query; not an error, nothing is refunded).
func cmdLedger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("ledger: name a subcommand (verify)")
	}
	if args[0] != "verify" {
		return usagef("ledger: unknown subcommand %q (want verify)", args[0])
	}
	fs := flag.NewFlagSet("ledger verify", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (dpproxy.yaml)")
	if err := parseFlags(fs, args[1:], false); err != nil {
		return err
	}
	if *path == "" {
		return usagef("ledger verify: --config FILE is required")
	}
	s, err := openSteward(ctx, *path, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	rep, err := s.ledger.Verify(ctx)
	if err != nil {
		return err
	}
	for _, r := range rep.Reserved {
		fmt.Fprintf(stdout, "charged but unanswered: charge %d (%s/%s at %s, ε=%s, δ=%s)\n", r.ID, r.Dataset, r.Analyst,
			r.CreatedAt.UTC().Format(time.RFC3339), fig(r.Cost.Epsilon), fig(r.Cost.Delta))
	}
	for _, m := range rep.Mismatches {
		fmt.Fprintf(stdout, "mismatch: %s\n", m)
	}
	if !rep.OK() {
		fmt.Fprintf(stdout, "FAILED: %d differences in %d budgets, %d charges\n", len(rep.Mismatches), rep.Budgets, rep.Charges)
		return errSilent
	}
	if rep.PLDEarlierOrder > 0 {
		fmt.Fprintf(stdout, "note: %d pld budgets hold figures computed in the composition order of builds before the pld memo (consistent; their next charge recomputes them)\n", rep.PLDEarlierOrder)
	}
	fmt.Fprintf(stdout, "ok: %d budgets, %d charges verified\n", rep.Budgets, rep.Charges)
	return nil
}
