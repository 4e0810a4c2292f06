// Package audit writes the steward's audit log (issue 18): one JSON line
// per statement, charge, refusal, incident and budget change, with the
// analyst, dataset, query fingerprint, ε, δ and outcome (SQLSTATE) — never
// a value, a noise sample, a SQL literal, a statement's text or a
// password. The log goes to a file rotated by size and age (lumberjack) or
// to stderr; it is off unless the config's audit: section names a path.
//
// The ledger stays the authoritative record of charges (dpproxy ledger
// verify); the audit log is the stream a steward ships to a SIEM.
//
// Lines of what an analyst can do for free — a statement that spends
// nothing (catalog, session, refused, failed, a cached answer) and a
// charge the ledger refused — are written at most FreeLinesPerSecond a
// second per analyst after a burst of FreeLinesBurst (internal/linerate);
// those left out are counted on the analyst's next line
// ("lines_not_logged"). Charges, incidents and budget changes are always
// written: the budget and the incident limit bound them. So an analyst's
// free statements add at most about 175 MB a day to the file (attack round
// 86: 18,000 refused statements, under a second of one session, had pushed
// every earlier line out of a 2 MB log); N analysts together, N times that
// (review round 87), which the file's size and backups must hold for the
// retention the steward needs.
package audit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dpproxy/dpproxy/internal/linerate"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/natefinch/lumberjack.v2"
)

// The rate of an analyst's free lines: 1,000 at once (a BI tool's catalog
// burst), then 10 a second: at most about 2 KB/s, 175 MB a day, per
// analyst.
const (
	FreeLinesBurst     = 1000
	FreeLinesPerSecond = 10
)

// Config is the audit: section of dpproxy.yaml.
type Config struct {
	// Path is the log file, or "stderr"; "" turns the log off.
	Path string
	// MaxSizeMB rotates the file at this size (default 100); MaxBackups
	// rotated files are kept (default 10), none older than MaxAgeDays
	// (default 0: no age limit).
	MaxSizeMB, MaxBackups, MaxAgeDays int
}

// Log is the audit log. A nil *Log writes nothing. Safe for concurrent
// use.
type Log struct {
	z      *zap.Logger
	closer io.Closer
	free   *linerate.Limiter // an analyst's free lines
}

// Event kinds (the "event" field).
const (
	EventStatement = "statement"
	EventCharge    = "charge"
	EventRefusal   = "refusal"
	EventIncident  = "incident"
	EventBudget    = "budget_change"
)

// Open opens the log; stderr is used for Path "stderr". A nil Log (and no
// error) is returned for an empty Path.
func Open(c Config, stderr io.Writer) (*Log, error) {
	var ws zapcore.WriteSyncer
	var closer io.Closer
	switch c.Path {
	case "":
		return nil, nil
	case "stderr":
		ws = zapcore.AddSync(stderr)
	default:
		dir := filepath.Dir(c.Path)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("audit.path: the directory %s does not exist; create it or choose another path", dir)
		}
		f, err := os.OpenFile(c.Path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("audit.path: %w", err)
		}
		f.Close()
		lj := &lumberjack.Logger{Filename: c.Path, MaxSize: orDefault(c.MaxSizeMB, 100), MaxBackups: orDefault(c.MaxBackups, 10),
			MaxAge: c.MaxAgeDays, LocalTime: false}
		ws, closer = zapcore.AddSync(lj), lj
	}
	enc := zapcore.EncoderConfig{
		TimeKey: "time", MessageKey: "event", LevelKey: zapcore.OmitKey, NameKey: zapcore.OmitKey,
		CallerKey: zapcore.OmitKey, StacktraceKey: zapcore.OmitKey, LineEnding: zapcore.DefaultLineEnding,
		EncodeTime: zapcore.RFC3339NanoTimeEncoder, EncodeDuration: zapcore.SecondsDurationEncoder,
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), ws, zapcore.InfoLevel)
	return &Log{z: zap.New(core), closer: closer, free: linerate.New(FreeLinesPerSecond, FreeLinesBurst)}, nil
}

func orDefault(x, d int) int {
	if x == 0 {
		return d
	}
	return x
}

// Close flushes and closes the file.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	err := l.z.Sync()
	if errors.Is(err, os.ErrInvalid) {
		err = nil
	}
	if l.closer != nil {
		if cerr := l.closer.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Enabled reports whether the log writes anything.
func (l *Log) Enabled() bool { return l != nil }

// Statement is one statement of a session.
type Statement struct {
	Analyst, Dataset, Route, Fingerprint string
	// SQLState is "00000" on success.
	SQLState string
	Duration time.Duration
	// DP answers: cost and cache hit; Charge is the ledger fingerprint.
	DP                     bool
	Cached                 bool
	CostEpsilon, CostDelta float64
	Charge                 string
}

// Statement writes one statement line (one that spends nothing within the
// analyst's rate of free lines).
func (l *Log) Statement(s Statement) {
	if l == nil {
		return
	}
	charged := s.DP && !s.Cached && (s.SQLState == "" || s.SQLState == "00000")
	if !charged && !l.free.Allow(s.Analyst) {
		return
	}
	f := []zap.Field{zap.String("analyst", s.Analyst), zap.String("dataset", s.Dataset), zap.String("route", s.Route),
		zap.String("fingerprint", s.Fingerprint), zap.String("sqlstate", s.SQLState), zap.String("outcome", outcome(s)),
		zap.Duration("duration", s.Duration)}
	if s.DP {
		f = append(f, zap.Bool("cached", s.Cached), zap.Float64("epsilon", s.CostEpsilon), zap.Float64("delta", s.CostDelta),
			zap.String("charge_fingerprint", s.Charge))
	}
	l.z.Info(EventStatement, l.notLogged(s.Analyst, f)...)
}

// notLogged adds to a line of analyst the count of their free lines left
// out before it.
func (l *Log) notLogged(analyst string, f []zap.Field) []zap.Field {
	if n := l.free.Dropped(analyst); n > 0 {
		f = append(f, zap.Int64(linerate.NotLoggedKey, n))
	}
	return f
}

// Charge writes a committed charge.
func (l *Log) Charge(analyst, dataset, fingerprint string, id int64, epsilon, delta, remainingEpsilon, remainingDelta float64) {
	if l == nil {
		return
	}
	l.z.Info(EventCharge, zap.String("analyst", analyst), zap.String("dataset", dataset), zap.String("fingerprint", fingerprint),
		zap.Int64("charge_id", id), zap.Float64("epsilon", epsilon), zap.Float64("delta", delta),
		zap.Float64("remaining_epsilon", remainingEpsilon), zap.Float64("remaining_delta", remainingDelta), zap.String("outcome", "charged"))
}

// Refusal writes a charge the ledger refused (budget exhausted,
// suspended) with its SQLSTATE.
func (l *Log) Refusal(analyst, dataset, fingerprint, sqlstate, reason string, epsilon, delta float64) {
	if l == nil || !l.free.Allow(analyst) {
		return
	}
	l.z.Info(EventRefusal, l.notLogged(analyst, []zap.Field{zap.String("analyst", analyst), zap.String("dataset", dataset), zap.String("fingerprint", fingerprint),
		zap.String("sqlstate", sqlstate), zap.String("outcome", reason), zap.Float64("epsilon", epsilon), zap.Float64("delta", delta)})...)
}

// Incident writes an error after a charge (kind and upstream SQLSTATE,
// never its message).
func (l *Log) Incident(analyst, dataset, fingerprint, kind, sqlstate string, chargeID int64, suspended bool) {
	if l == nil {
		return
	}
	l.z.Info(EventIncident, zap.String("analyst", analyst), zap.String("dataset", dataset), zap.String("fingerprint", fingerprint),
		zap.String("kind", kind), zap.String("sqlstate", sqlstate), zap.Int64("charge_id", chargeID), zap.Bool("suspended", suspended),
		zap.String("outcome", "incident"))
}

// BudgetChange writes a steward action (grant, reset, resume) or a window
// renewal.
func (l *Log) BudgetChange(action, analyst, dataset, actor string, epsilon, delta float64) {
	if l == nil {
		return
	}
	l.z.Info(EventBudget, zap.String("action", action), zap.String("analyst", analyst), zap.String("dataset", dataset),
		zap.String("actor", actor), zap.Float64("epsilon", epsilon), zap.Float64("delta", delta), zap.String("outcome", action))
}

// outcome names a statement's result: answered, cached (a DP answer from
// the cache), refused (by policy, budget, rate limit or a bad setting:
// SQLSTATE classes 42, 0A, 53, 22, 25, 55) or error.
func outcome(s Statement) string {
	switch {
	case s.SQLState == "" || s.SQLState == "00000":
		if s.Cached {
			return "cached"
		}
		return "answered"
	case len(s.SQLState) == 5:
		switch s.SQLState[:2] {
		case "42", "0A", "53", "22", "25", "55":
			return "refused"
		}
	}
	return "error"
}
