package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/audit"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/numfmt"
	"github.com/dpproxy/dpproxy/ledger"
	"github.com/dpproxy/dpproxy/policy"
)

// steward is what the budget and ledger commands work with: the config,
// its policies by dataset name, and the ledger.
type steward struct {
	cfg      *config.Config
	policies map[string]*policy.Dataset
	ledger   *ledger.Ledger
	audit    *audit.Log // nil: the config has no audit log
}

// openSteward loads the config and its policies and opens the ledger
// (migrating its schema if needed). Warnings and errors of the ledger go to
// stderr.
func openSteward(ctx context.Context, path string, stderr io.Writer) (*steward, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	list, err := loadPolicies(cfg)
	if err != nil {
		return nil, err
	}
	s := &steward{cfg: cfg, policies: map[string]*policy.Dataset{}}
	for _, ds := range list {
		s.policies[ds.Name] = ds
	}
	log, err := newLogger(stderr, "warn")
	if err != nil {
		return nil, err
	}
	if s.ledger, err = ledger.Open(ctx, cfg.Ledger, log); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	o, err := openOps(&config.Config{Audit: cfg.Audit, Dir: cfg.Dir}, nil, stderr)
	if err != nil {
		s.ledger.Close()
		return nil, err
	}
	s.audit = o.audit
	return s, nil
}

func (s *steward) close() {
	s.ledger.Close()
	_ = s.audit.Close()
}

// dataset returns the policy of a dataset named on the command line.
func (s *steward) dataset(name string) (*policy.Dataset, error) {
	ds := s.policies[name]
	if ds == nil {
		var names []string
		for n := range s.policies {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("no policy for dataset %q in %s (datasets: %s)", name, s.cfg.Path(s.cfg.Policies), strings.Join(names, ", "))
	}
	return ds, nil
}

// analyst checks that an analyst named on the command line is in the config.
func (s *steward) analyst(name string, ds *policy.Dataset) error {
	if t, ok := strings.CutPrefix(name, policy.TeamLedgerPrefix); ok {
		if ds.Teams[t] == nil {
			return fmt.Errorf("team %q is not in the policy of %s (teams:)", t, ds.Name)
		}
		return nil
	}
	if _, ok := s.cfg.Analysts[name]; !ok {
		return fmt.Errorf("analyst %q is not in the config's analysts: (add them there first, or check the spelling)", name)
	}
	return nil
}

// actor names who runs a steward command, for the audit row.
func actor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		name += "@" + h
	}
	return name
}

// fig formats a budget figure as a person writes it (internal/numfmt).
func fig(x float64) string { return numfmt.Figure(x) }

func cmdBudget(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("budget: name a subcommand (show, grant, reset or resume)")
	}
	sub := args[0]
	fs := flag.NewFlagSet("budget "+sub, flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (dpproxy.yaml)")
	analyst := fs.String("analyst", "", "analyst")
	dataset := fs.String("dataset", "", "dataset")
	var eps, delta *float64
	var confirm *bool
	switch sub {
	case "show":
	case "grant":
		eps = fs.Float64("epsilon", 0, "ε to add to the analyst's limit")
		delta = fs.Float64("delta", 0, "δ to add to the analyst's limit")
	case "reset":
		confirm = fs.Bool("confirm", false, "really set the analyst's spending back to zero")
	case "resume":
	default:
		return usagef("budget: unknown subcommand %q (want show, grant, reset or resume)", sub)
	}
	if err := parseFlags(fs, args[1:], false); err != nil {
		return err
	}
	if *path == "" {
		return usagef("%s: --config FILE is required", fs.Name())
	}
	if sub != "show" && (*analyst == "" || *dataset == "") {
		return usagef("%s: --analyst A and --dataset D are required", fs.Name())
	}
	if sub == "grant" {
		if math.IsNaN(*eps) || math.IsInf(*eps, 0) || *eps < 0 || math.IsNaN(*delta) || *delta < 0 || *delta >= 1 {
			return usagef("%s: --epsilon must be finite and ≥ 0 and --delta in [0, 1)", fs.Name())
		}
		if *eps == 0 && *delta == 0 {
			return usagef("%s: give --epsilon X (and/or --delta Y) to add", fs.Name())
		}
	}
	if sub == "reset" && !*confirm {
		return usagef("%s: refusing without --confirm (it sets %s's spending on %s back to zero; charge rows are kept and an audit row is written)", fs.Name(), *analyst, *dataset)
	}

	s, err := openSteward(ctx, *path, stderr)
	if err != nil {
		return err
	}
	defer s.close()
	var ds *policy.Dataset
	if *dataset != "" {
		if ds, err = s.dataset(*dataset); err != nil {
			return err
		}
	}
	switch sub {
	case "show":
		return s.show(ctx, *dataset, *analyst, stdout)
	case "grant":
		if err := s.analyst(*analyst, ds); err != nil {
			return err
		}
		st, err := s.ledger.Grant(ctx, ds, *analyst, accountant.Spent{Epsilon: *eps, Delta: *delta}, actor())
		if err != nil {
			return err
		}
		s.audit.BudgetChange("grant", *analyst, ds.Name, actor(), *eps, *delta)
		rem := st.Remaining()
		fmt.Fprintf(stdout, "granted ε=%s, δ=%s to %s on %s: limit now ε=%s, δ=%s; remaining ε=%s, δ=%s\n",
			fig(*eps), fig(*delta), *analyst, ds.Name, fig(st.Limit.Epsilon), fig(st.Limit.Delta), fig(rem.Epsilon), fig(rem.Delta))
		return nil
	case "resume":
		n, err := s.ledger.Resume(ctx, ds, *analyst, actor())
		if err != nil {
			return err
		}
		s.audit.BudgetChange("resume", *analyst, ds.Name, actor(), 0, 0)
		fmt.Fprintf(stdout, "resumed %s on %s: %d incident(s) cleared (incident rows kept; audit row written)\n", *analyst, ds.Name, n)
		return nil
	default: // reset
		before, err := s.ledger.Reset(ctx, ds, *analyst, actor())
		if err != nil {
			return err
		}
		s.audit.BudgetChange("reset", *analyst, ds.Name, actor(), before.Spent.Epsilon, before.Spent.Delta)
		fmt.Fprintf(stdout, "reset %s on %s: spent ε=%s, δ=%s before, 0 now (their charge count too; the charge rows stay for ledger verify, and the dataset's total across analysts and its global cap keep counting them: a reset cannot undo what was released; audit row written)\n",
			*analyst, ds.Name, fig(before.Spent.Epsilon), fig(before.Spent.Delta))
		return nil
	}
}

// show prints the budget table.
func (s *steward) show(ctx context.Context, dataset, analyst string, stdout io.Writer) error {
	rows, err := s.ledger.Budgets(ctx, s.policies, dataset, analyst)
	if err != nil {
		return err
	}
	// Datasets with budget windows get two more columns: when the
	// window renews, and ε spent of the lifetime cap.
	windows := false
	for _, b := range rows {
		windows = windows || b.Status.Lifetime != nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	head := "dataset\tanalyst\taccountant\tepsilon_spent\tepsilon_limit\tepsilon_remaining\tdelta_spent\tdelta_limit\tdelta_remaining\tcharges\tunanswered\tincidents"
	if windows {
		head += "\twindow_renews\tlifetime_epsilon"
	}
	fmt.Fprintln(tw, head)
	for _, b := range rows {
		who := b.Analyst
		if who == "" {
			who = "(all analysts)"
		}
		rem := b.Status.Remaining()
		incidents := strconv.Itoa(b.Incidents)
		if b.Suspended {
			incidents += " (suspended)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s", b.Dataset, who, b.Status.Accountant,
			fig(b.Status.Spent.Epsilon), fig(b.Status.Limit.Epsilon), fig(rem.Epsilon),
			fig(b.Status.Spent.Delta), fig(b.Status.Limit.Delta), fig(rem.Delta), b.Charges, b.Reserved, incidents)
		if windows {
			renews, life := "-", "-"
			if !b.Status.Renews.IsZero() {
				renews = b.Status.Renews.UTC().Format("2006-01-02T15:04Z")
			}
			if lt := b.Status.Lifetime; lt != nil {
				life = fig(lt.Spent.Epsilon) + "/" + fig(lt.Limit.Epsilon)
			}
			fmt.Fprintf(tw, "\t%s\t%s", renews, life)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, known := s.cfg.Analysts[analyst]; len(rows) == 0 && analyst != "" && !known && !strings.Contains(analyst, ":") {
		names := make([]string, 0, len(s.cfg.Analysts))
		for n := range s.cfg.Analysts {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(stdout, "(no budgets: %s is not an analyst of this config; its analysts: %s)\n", analyst, strings.Join(names, ", "))
	} else if len(rows) == 0 {
		fmt.Fprintln(stdout, "(no budgets: nothing was charged yet)")
	}
	// Recent incidents (errors after a charge): what failed and where,
	// never a value.
	incs, err := s.ledger.Incidents(ctx, dataset, analyst, 20)
	if err != nil || len(incs) == 0 {
		return err
	}
	fmt.Fprintln(stdout, "\nrecent incidents (an error after a charge; resume with: dpproxy budget resume --dataset D --analyst A):")
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "at\tdataset\tanalyst\tcharge\tkind\tsqlstate\tfingerprint\tsuspended")
	for _, i := range incs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%.16s\t%v\n", i.At, i.Dataset, i.Analyst, i.ChargeID, i.Kind, i.SQLState, i.Fingerprint, i.Suspended)
	}
	return tw.Flush()
}
