// Command dpproxy is a PostgreSQL wire-protocol proxy that answers analysts'
// SQL aggregates with differentially private results.
//
// Usage:
//
//	dpproxy serve --config dpproxy.yaml
//	dpproxy demo [--data-dir DIR] [--listen 127.0.0.1:6432]
//	dpproxy demo-setup --admin-dsn DSN --shadow-admin-dsn DSN
//	dpproxy policy validate FILE...
//	dpproxy policy init --dsn DSN --table T (--config FILE | --ledger DSN) [--out FILE]
//	dpproxy passwd NAME
//	dpproxy accountant epsilon|delta --method M ... [--laplace B:K]... [--gaussian S:K]...
//	dpproxy budget show|grant|reset|resume --config FILE ...
//	dpproxy ledger verify --config FILE
//	dpproxy doctor --config FILE
//	dpproxy shadow restrict --config FILE --dataset D --superuser-dsn DSN
//
// This package only wires flags, configuration, the logger and signals to
// the other packages; it holds no logic of its own.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage:
  dpproxy serve --config FILE            serve with a configuration file
  dpproxy demo [--data-dir DIR] [--listen ADDR]
                                         start throwaway PostgreSQL clusters (data, shadow catalog) with demo data and serve it
  dpproxy demo-setup --admin-dsn DSN --shadow-admin-dsn DSN
                                         load the demo data and roles into an existing PostgreSQL,
                                         and the shadow catalog's database into a second one
  dpproxy policy validate FILE...        check policy files
  dpproxy policy init --dsn DSN --table T (--config FILE | --ledger DSN) [--dataset D]
                      [--steward NAME] [--steward-epsilon 1] [--epsilon 0.5] [--out FILE]
                                         a policy skeleton from the live schema (DP bounds)
  dpproxy passwd NAME                    print a SCRAM-SHA-256 verifier for the config (password from stdin)
  dpproxy accountant epsilon --method M --delta D [--laplace B:K]... [--gaussian S:K]...
  dpproxy accountant delta --method M --epsilon E [--laplace B:K]... [--gaussian S:K]...
                                         composed ε (or δ) of a workload; B = Laplace scale/L1
                                         sensitivity, S = σ/L2 sensitivity, K = releases
  dpproxy budget show --config FILE [--analyst A] [--dataset D]
                                         analysts' budgets: spent, limit, remaining, incidents
  dpproxy budget grant --config FILE --analyst A --dataset D --epsilon X [--delta Y]
                                         add to an analyst's limit (audited)
  dpproxy budget reset --config FILE --analyst A --dataset D --confirm
                                         set an analyst's spending back to zero (audited)
  dpproxy budget resume --config FILE --analyst A --dataset D
                                         end a suspension after an incident (audited)
  dpproxy ledger verify --config FILE    recompute every budget from the ledger's charges
  dpproxy doctor --config FILE           check the live privileges of the data, ledger and shadow roles
  dpproxy shadow restrict --config FILE --dataset D --superuser-dsn DSN
                                         as a superuser, revoke the shadow's volatile functions from its role
`

// usageError is a bad command line: exit status 2, the reason and the usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// errSilent is returned when the command already printed why it failed.
var errSilent = errors.New("failed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdin, stdout, stderr)
	var ue usageError
	var help helpText
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		fmt.Fprint(stdout, help.text)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "dpproxy: %s\n%s", ue.msg, usage)
		return 2
	case errors.Is(err, errSilent):
		return 1
	default:
		fmt.Fprintf(stderr, "dpproxy: %v\n", err)
		return 1
	}
}

func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("no command given")
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stderr)
	case "bench-serve":
		return cmdBenchServe(ctx, args[1:], stderr)
	case "demo":
		return cmdDemo(ctx, args[1:], stdout, stderr)
	case "demo-setup":
		return cmdDemoSetup(ctx, args[1:], stdout, stderr)
	case "policy":
		if len(args) < 2 {
			return usagef("policy: name a subcommand (validate or init)")
		}
		switch args[1] {
		case "validate":
			return cmdPolicyValidate(args[2:], stdout, stderr)
		case "init":
			return cmdPolicyInit(ctx, args[2:], stdout, stderr) // policy_init.go
		}
		return usagef("policy: unknown subcommand %q (want validate or init)", args[1])
	case "passwd":
		return cmdPasswd(args[1:], stdin, stdout, stderr)
	case "accountant":
		return cmdAccountant(args[1:], stdout)
	case "budget":
		return cmdBudget(ctx, args[1:], stdout, stderr)
	case "ledger":
		return cmdLedger(ctx, args[1:], stdout, stderr)
	case "doctor":
		return cmdDoctor(ctx, args[1:], stdout)
	case "shadow":
		return cmdShadow(ctx, args[1:], stdout)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return usagef("unknown command %q", args[0])
	}
}
