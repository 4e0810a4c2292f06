// Package config loads dpproxy's own configuration file (dpproxy.yaml): where
// to listen, which upstream, shadow and ledger databases to use, where the
// policy files are, and which analysts may connect with which credentials.
// Dataset policies live in their own files (package policy).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/dpproxy/dpproxy/policy"
)

// Config is a loaded, validated dpproxy.yaml. Immutable after Load.
type Config struct {
	Listen string `yaml:"listen"`
	// Policies is a policy file or a directory of them, relative to the
	// config file.
	Policies string `yaml:"policies"`
	// Ledger is the DSN of the ledger database (its own role).
	Ledger string `yaml:"ledger"`
	// Datasets maps a dataset name (as in its policy) to its databases.
	Datasets map[string]DatasetConfig `yaml:"datasets"`
	// Analysts maps an analyst name (the PostgreSQL user name they connect
	// with) to their credentials.
	Analysts map[string]Analyst `yaml:"analysts"`
	// StatementTimeout bounds each upstream DP query (default 30s).
	StatementTimeout Duration `yaml:"statement_timeout"`
	// MaxConnections bounds concurrent client connections (default 200),
	// and MaxConnectionsPerAnalyst one analyst's authenticated sessions
	// (default DefaultMaxConnectionsPerAnalyst: a quarter of
	// max_connections, at least 2, never all of them), so that one
	// analyst's idle sessions cannot shut the others out.
	MaxConnections           int `yaml:"max_connections"`
	MaxConnectionsPerAnalyst int `yaml:"max_connections_per_analyst"`
	// MaxMemoryPerAnalystMB bounds what one analyst's sessions together
	// keep in the proxy's memory between statements (prepared statements,
	// portals, unread results, savepoints; default 256).
	MaxMemoryPerAnalystMB int `yaml:"max_memory_per_analyst_mb"`
	// UpstreamMaxConnections bounds each dataset's pool of connections to
	// its data database, which DP queries not answered from the cache
	// queue for (default DefaultUpstreamMaxConnections).
	UpstreamMaxConnections int `yaml:"upstream_max_connections"`
	// ShadowMaxConnections bounds each dataset's pool of connections to
	// its shadow database, shared by all client sessions (default
	// DefaultShadowMaxConnections). ShadowAcquireTimeout is how long a
	// catalog statement waits for one when all are busy before it fails
	// with 53300 (default 5s).
	ShadowMaxConnections int      `yaml:"shadow_max_connections"`
	ShadowAcquireTimeout Duration `yaml:"shadow_acquire_timeout"`
	// DPConcurrency bounds the DP queries that read data at once on each
	// dataset (default: upstream_max_connections), and
	// DPConcurrencyPerAnalyst those of one analyst, over all their
	// sessions (default 2); waiting queries take turns by analyst and
	// fail uncharged with 53000 after DPQueueTimeout (default 30s).
	// proxy/admission.go.
	DPConcurrency           int      `yaml:"dp_concurrency"`
	DPConcurrencyPerAnalyst int      `yaml:"dp_concurrency_per_analyst"`
	DPQueueTimeout          Duration `yaml:"dp_queue_timeout"`
	// ShadowMaxConnectionsPerAnalyst bounds the shadow connections one
	// analyst's sessions hold at once, so that one analyst cannot take the
	// pool the others share (default: a quarter of shadow_max_connections,
	// at least 1). Over it a catalog statement waits up to
	// shadow_acquire_timeout, then fails with 53300.
	ShadowMaxConnectionsPerAnalyst int `yaml:"shadow_max_connections_per_analyst"`
	// CatalogStatementTimeout is the statement_timeout of the shadow
	// connections: no catalog statement runs longer (default 10s). An
	// analyst's own statement_timeout, when shorter, still applies.
	CatalogStatementTimeout Duration `yaml:"catalog_statement_timeout"`
	// IdleTimeout closes a client session idle for this long (default 1h;
	// "0s" disables it).
	IdleTimeout *Duration `yaml:"idle_timeout"`
	// MaxMessageBytes bounds every client message after authentication
	// (default 1 MiB); before authentication the bound is 10 KB.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// TLS, when set, enables TLS on SSLRequest.
	TLS *TLSConfig `yaml:"tls"`
	// LogLevel is debug, info, warn or error (default info).
	LogLevel string `yaml:"log_level"`
	// RateLimit bounds the DP queries of every analyst without a
	// rate_limit of their own (default: none).
	RateLimit *RateLimit `yaml:"rate_limit"`
	// Admin, when set, serves the steward's HTTP endpoint (metrics,
	// health, dashboard: internal/admin). Off by default.
	Admin *Admin `yaml:"admin"`
	// Audit, when set, writes the audit log (internal/audit). Off by
	// default.
	Audit *Audit `yaml:"audit"`

	// Dir is the directory of the config file; relative paths resolve there.
	Dir string `yaml:"-"`
}

// Defaults of the connection pools.
const (
	// DefaultUpstreamMaxConnections: a DP query is one scan of the data,
	// so more connections help as long as the data server has cores and
	// I/O for them; 10 (HikariCP's default pool size) leaves most of
	// PostgreSQL's default max_connections (100) to other clients.
	DefaultUpstreamMaxConnections = 10
	// DefaultShadowMaxConnections: catalog statements take milliseconds,
	// so 20 connections serve hundreds of sessions (the load test: 200).
	DefaultShadowMaxConnections = 20
	// DefaultCatalogStatementTimeout: catalog statements take
	// milliseconds; one that runs for seconds holds a connection that all
	// analysts share.
	DefaultCatalogStatementTimeout = 10 * time.Second
	// MaxPoolConnections bounds both pool settings.
	MaxPoolConnections = 1000
	// DefaultMaxMemoryPerAnalystMB: room for a 16 MiB answer of each of
	// an analyst's admitted DP queries with their statements and cursors.
	DefaultMaxMemoryPerAnalystMB = 256
)

// DatasetConfig names the databases of one dataset.
type DatasetConfig struct {
	// Upstream is the DSN of the data database, as a role that can only
	// SELECT the exposed columns. Only emitted SQL runs on it.
	Upstream string `yaml:"upstream"`
	// Shadow is the DSN analysts' catalog statements run on: a database
	// holding the exposed schema and no rows, as a role that cannot connect
	// to the data database.
	Shadow string `yaml:"shadow"`
	// ShadowAdmin is the DSN the proxy uses at start-up to (re)build the
	// shadow schema from the policy. It owns the shadow tables.
	ShadowAdmin string `yaml:"shadow_admin"`
	// ResponseTime, when set, pads every DP answer of the dataset (and
	// every error after its charge) to at least this long from the moment
	// its release starts (reservation, upstream query, noise), so that the time to answer does not reveal
	// how much work the data made upstream (default 0s: no padding).
	ResponseTime Duration `yaml:"response_time"`
	// WorkRate is the rows per second one DP query is sure to process
	// upstream. With response_time and the policy's
	// max_rows it fixes each answer's time slot before the charge: the
	// first of response_time, 2·response_time, 4·… that covers the plan's
	// work bound at this rate; a plan whose slot exceeds statement_timeout
	// is refused uncharged (proxy/dp.go, issue 27). Default 500000.
	WorkRate float64 `yaml:"work_rate"`
	// PublicMaxRows caps the rows the proxy copies of each public table
	// into the shadow (internal/shadow, mirror.go); a larger table is not
	// copied and reads of it are refused with a hint (default 100000).
	PublicMaxRows int `yaml:"public_max_rows"`
	// PublicRefresh, when set, re-copies the public tables this often
	// (they are also copied at start-up and on SIGHUP). Default 0s: no
	// periodic refresh.
	PublicRefresh Duration `yaml:"public_refresh"`
}

// DefaultPublicMaxRows and MaxPublicMaxRows are the default and the
// largest public_max_rows; they match internal/shadow's DefaultMaxPublicRows
// and MaxMaxPublicRows (config imports nothing of the project).
const (
	// DefaultWorkRate is a cautious rate for one DP query on a 2-core
	// PostgreSQL 15: BENCHMARKS.md measured the fixed-bound DP aggregate
	// over 1M rows at 1.3 s on a quiet machine (about 770,000 rows/s).
	DefaultWorkRate      = 500_000
	DefaultPublicMaxRows = 100_000
	MaxPublicMaxRows     = 10_000_000
)

// RateLimit is a token bucket: PerSecond DP queries per second on
// average, up to Burst at once. One bucket per analyst and proxy, shared
// by all their sessions and datasets.
type RateLimit struct {
	PerSecond float64 `yaml:"per_second"`
	// Burst defaults to PerSecond rounded up (at least 1).
	Burst int `yaml:"burst"`
}

func (r *RateLimit) check(where string) []string {
	var errs []string
	if r.PerSecond <= 0 || r.PerSecond > 1e6 {
		errs = append(errs, where+".per_second must be between 0 and 1000000 (exclusive of 0)")
	}
	if r.Burst < 0 {
		errs = append(errs, where+".burst must not be negative")
	}
	if r.Burst == 0 {
		r.Burst = max(1, int(math.Ceil(r.PerSecond)))
	}
	return errs
}

// Analyst holds one analyst's credentials.
type Analyst struct {
	// Password is a SCRAM-SHA-256 verifier made by `dpproxy passwd`, or (for
	// demos only) a plain password written as "plain:…".
	Password string `yaml:"password"`
	// Datasets this analyst may query; empty means all.
	Datasets []string `yaml:"datasets"`
	// RateLimit bounds this analyst's DP queries (default: the config's
	// rate_limit).
	RateLimit *RateLimit `yaml:"rate_limit"`
}

// TLSConfig holds the server certificate.
type TLSConfig struct {
	Cert    string `yaml:"cert"`
	Key     string `yaml:"key"`
	Require bool   `yaml:"require"`
	// AllowCleartextPassword lets TLS sessions authenticate with a
	// cleartext password message (for clients without SCRAM); plaintext
	// sessions always use SCRAM-SHA-256. Default false.
	AllowCleartextPassword bool `yaml:"allow_cleartext_password"`
}

// Admin configures the steward's HTTP endpoint.
type Admin struct {
	// Listen is host:port; an address other than loopback needs TLS.
	Listen string `yaml:"listen"`
	// User and Password are the steward's credentials (HTTP basic auth):
	// Password a SCRAM-SHA-256 verifier from `dpproxy passwd USER`, or
	// plain:… for demos. User may not be an analyst's name.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// TLS serves HTTPS, with a certificate like the pgwire side's.
	TLS *AdminTLS `yaml:"tls"`
}

// AdminTLS is the admin endpoint's certificate.
type AdminTLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Audit configures the audit log file.
type Audit struct {
	// Path is the log file (relative to the config file), or stderr.
	Path string `yaml:"path"`
	// MaxSizeMB rotates the file at this size (default 100), keeping
	// MaxBackups files (default 10) for at most MaxAgeDays (default 0:
	// no age limit).
	MaxSizeMB  int `yaml:"max_size_mb"`
	MaxBackups int `yaml:"max_backups"`
	MaxAgeDays int `yaml:"max_age_days"`
}

// TeamPrefix starts the ledger name of a team's budget row
// (policy.TeamLedgerPrefix); no analyst may be called that.
const TeamPrefix = "team:"

func (c *Config) checkOps() []string {
	var errs []string
	for n := range c.Analysts {
		if strings.HasPrefix(n, TeamPrefix) {
			errs = append(errs, fmt.Sprintf("analysts.%s: names starting with %q are reserved for teams' budgets", n, TeamPrefix))
		}
		if strings.HasPrefix(n, policy.StewardLedgerPrefix) {
			errs = append(errs, fmt.Sprintf("analysts.%s: names starting with %q are reserved for stewards' budgets (dpproxy policy init)", n, policy.StewardLedgerPrefix))
		}
	}
	if a := c.Admin; a != nil {
		host, _, err := net.SplitHostPort(a.Listen)
		switch {
		case a.Listen == "":
			errs = append(errs, "admin.listen: give host:port for the admin endpoint (e.g. 127.0.0.1:9187), or remove the admin section")
		case err != nil:
			errs = append(errs, fmt.Sprintf("admin.listen: %q is not host:port", a.Listen))
		case a.TLS == nil && !loopback(host):
			errs = append(errs, fmt.Sprintf("admin.listen: %s is not a loopback address, so admin.tls (cert and key) is required: the steward's password would cross the network in clear", a.Listen))
		}
		if a.Listen != "" && a.Listen == c.Listen {
			errs = append(errs, "admin.listen must differ from listen")
		}
		switch {
		case a.User == "":
			errs = append(errs, "admin.user: name the steward user for HTTP basic authentication")
		case hasAnalyst(c.Analysts, a.User):
			errs = append(errs, fmt.Sprintf("admin.user: %s is an analyst; the admin endpoint needs a steward's own credentials, never an analyst's", a.User))
		}
		if !strings.HasPrefix(a.Password, "SCRAM-SHA-256$") && !(strings.HasPrefix(a.Password, "plain:") && len(a.Password) > len("plain:")) {
			errs = append(errs, fmt.Sprintf("admin.password: use a verifier from `dpproxy passwd %s` (or plain:… for demos)", firstNonEmpty(a.User, "steward")))
		}
		if a.TLS != nil && (a.TLS.Cert == "" || a.TLS.Key == "") {
			errs = append(errs, "admin.tls: both cert and key are required")
		}
	}
	if a := c.Audit; a != nil {
		if a.Path == "" {
			errs = append(errs, "audit.path: name the audit log file (or stderr), or remove the audit section")
		}
		if a.MaxSizeMB < 0 || a.MaxBackups < 0 || a.MaxAgeDays < 0 {
			errs = append(errs, "audit: max_size_mb, max_backups and max_age_days must not be negative")
		}
	}
	return errs
}

func hasAnalyst(m map[string]Analyst, n string) bool { _, ok := m[n]; return ok }

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// loopback reports whether host is a loopback address or localhost.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration struct{ time.Duration }

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (write e.g. 30s)", n.Line, n.Value)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.Duration.String(), nil }

// MaxNameBytes bounds analyst and dataset names: PostgreSQL's user and
// database names (NAMEDATALEN−1), to which the proxy cuts the start-up's.
const MaxNameBytes = 63

// Load reads and validates a config file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	c.Dir = abs
	return c, nil
}

// Parse decodes and validates config text; name is used in errors.
func Parse(data []byte, name string) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, policy.ConfigYAMLErrors(name, data, err)
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:6432"
	}
	if c.StatementTimeout.Duration == 0 {
		c.StatementTimeout.Duration = 30 * time.Second
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = 200
	}
	if c.UpstreamMaxConnections == 0 {
		c.UpstreamMaxConnections = DefaultUpstreamMaxConnections
	}
	if c.MaxMemoryPerAnalystMB == 0 {
		c.MaxMemoryPerAnalystMB = DefaultMaxMemoryPerAnalystMB
	}
	if c.ShadowMaxConnections == 0 {
		c.ShadowMaxConnections = DefaultShadowMaxConnections
	}
	if c.ShadowAcquireTimeout.Duration == 0 {
		c.ShadowAcquireTimeout.Duration = 5 * time.Second
	}
	if c.DPConcurrency == 0 {
		c.DPConcurrency = c.UpstreamMaxConnections
	}
	if c.DPConcurrencyPerAnalyst == 0 {
		c.DPConcurrencyPerAnalyst = DefaultDPConcurrencyPerAnalyst(c.DPConcurrency)
	}
	if c.DPQueueTimeout.Duration == 0 {
		c.DPQueueTimeout.Duration = 30 * time.Second
	}
	if c.MaxConnectionsPerAnalyst == 0 && c.MaxConnections > 0 {
		c.MaxConnectionsPerAnalyst = DefaultMaxConnectionsPerAnalyst(c.MaxConnections)
	}
	if c.ShadowMaxConnectionsPerAnalyst == 0 {
		c.ShadowMaxConnectionsPerAnalyst = max(1, c.ShadowMaxConnections/4)
	}
	if c.CatalogStatementTimeout.Duration == 0 {
		c.CatalogStatementTimeout.Duration = DefaultCatalogStatementTimeout
	}
	if c.IdleTimeout == nil {
		c.IdleTimeout = &Duration{time.Hour}
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 1 << 20
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	var errs []string
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Sprintf("listen: %q is not host:port", c.Listen))
	}
	if c.Policies == "" {
		errs = append(errs, "policies: name a policy file or a directory of them")
	}
	if c.Ledger == "" {
		errs = append(errs, "ledger: give the DSN of the ledger database")
	}
	if len(c.Datasets) == 0 {
		errs = append(errs, "datasets: declare at least one dataset with its upstream and shadow DSNs")
	}
	for n, d := range c.Datasets {
		if len(n) > MaxNameBytes {
			errs = append(errs, fmt.Sprintf("datasets.%.20s…: a dataset name is the database clients connect to, at most %d bytes as in PostgreSQL", n, MaxNameBytes))
		}
		if d.Upstream == "" || d.Shadow == "" || d.ShadowAdmin == "" {
			errs = append(errs, fmt.Sprintf("datasets.%s: upstream, shadow and shadow_admin are all required", n))
		}
		if d.ResponseTime.Duration < 0 || d.ResponseTime.Duration > 10*time.Minute {
			errs = append(errs, fmt.Sprintf("datasets.%s.response_time must be between 0s and 10m", n))
		}
		if d.PublicMaxRows == 0 {
			d.PublicMaxRows = DefaultPublicMaxRows
			c.Datasets[n] = d
		}
		if d.WorkRate == 0 {
			d.WorkRate = DefaultWorkRate
			c.Datasets[n] = d
		}
		if d.WorkRate < 1000 || d.WorkRate > 1e12 {
			errs = append(errs, fmt.Sprintf("datasets.%s.work_rate must be between 1000 and 1e12 rows per second", n))
		}
		if d.PublicMaxRows < 1 || d.PublicMaxRows > MaxPublicMaxRows {
			errs = append(errs, fmt.Sprintf("datasets.%s.public_max_rows must be between 1 and %d", n, MaxPublicMaxRows))
		}
		if d.PublicRefresh.Duration != 0 && (d.PublicRefresh.Duration < 10*time.Second || d.PublicRefresh.Duration > 7*24*time.Hour) {
			errs = append(errs, fmt.Sprintf("datasets.%s.public_refresh must be 0s (no periodic refresh) or between 10s and 168h", n))
		}
	}
	if len(c.Analysts) == 0 {
		errs = append(errs, "analysts: declare at least one analyst")
	}
	for n, a := range c.Analysts {
		if len(n) > MaxNameBytes {
			errs = append(errs, fmt.Sprintf("analysts.%.20s…: an analyst name is the PostgreSQL user name, at most %d bytes as in PostgreSQL", n, MaxNameBytes))
		}
		if !strings.HasPrefix(a.Password, "SCRAM-SHA-256$") && !strings.HasPrefix(a.Password, "plain:") {
			errs = append(errs, fmt.Sprintf("analysts.%s.password: use a verifier from `dpproxy passwd %s` (or plain:… for demos)", n, n))
		}
		if a.RateLimit != nil {
			errs = append(errs, a.RateLimit.check("analysts."+n+".rate_limit")...)
		}
	}
	if c.RateLimit != nil {
		errs = append(errs, c.RateLimit.check("rate_limit")...)
	}
	if c.MaxConnections < 1 {
		errs = append(errs, "max_connections must be positive")
	}
	if c.UpstreamMaxConnections < 1 || c.UpstreamMaxConnections > MaxPoolConnections {
		errs = append(errs, fmt.Sprintf("upstream_max_connections must be between 1 and %d", MaxPoolConnections))
	}
	if c.DPConcurrency < 1 || c.DPConcurrency > c.UpstreamMaxConnections {
		errs = append(errs, fmt.Sprintf("dp_concurrency must be between 1 and upstream_max_connections (%d): more would queue in the upstream pool, unfairly", c.UpstreamMaxConnections))
	}
	if c.DPConcurrencyPerAnalyst < 1 || c.DPConcurrencyPerAnalyst > c.DPConcurrency {
		errs = append(errs, "dp_concurrency_per_analyst must be between 1 and dp_concurrency")
	}
	if c.DPQueueTimeout.Duration < 0 {
		errs = append(errs, "dp_queue_timeout must not be negative")
	}
	if c.ShadowMaxConnections < 1 || c.ShadowMaxConnections > MaxPoolConnections {
		errs = append(errs, fmt.Sprintf("shadow_max_connections must be between 1 and %d", MaxPoolConnections))
	}
	if c.ShadowAcquireTimeout.Duration < 0 || c.ShadowAcquireTimeout.Duration > 10*time.Minute {
		errs = append(errs, "shadow_acquire_timeout must be between 0s and 10m (0s: the default, 5s)")
	}
	if c.MaxMemoryPerAnalystMB < 0 {
		errs = append(errs, "max_memory_per_analyst_mb must not be negative (0: the default, 256)")
	}
	if c.MaxConnectionsPerAnalyst < 0 {
		errs = append(errs, "max_connections_per_analyst must be positive")
	}
	if c.ShadowMaxConnectionsPerAnalyst < 1 || c.ShadowMaxConnectionsPerAnalyst > c.ShadowMaxConnections {
		errs = append(errs, "shadow_max_connections_per_analyst must be between 1 and shadow_max_connections")
	}
	if d := c.CatalogStatementTimeout.Duration; d < 10*time.Millisecond || d > time.Hour {
		errs = append(errs, "catalog_statement_timeout must be between 10ms and 1h (0s: the default, 10s)")
	}
	if c.IdleTimeout.Duration < 0 {
		errs = append(errs, "idle_timeout must not be negative (0s disables it)")
	}
	if c.MaxMessageBytes < 1024 || c.MaxMessageBytes > 1<<30 {
		errs = append(errs, "max_message_bytes must be between 1024 and 1073741824")
	}
	if c.TLS != nil && (c.TLS.Cert == "" || c.TLS.Key == "") {
		errs = append(errs, "tls: both cert and key are required")
	}
	errs = append(errs, c.checkOps()...)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, "log_level: use debug, info, warn or error")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %s", name, strings.Join(errs, "; "))
	}
	return &c, nil
}

// Path resolves a path from the config file against its directory.
func (c *Config) Path(p string) string {
	if p == "" || filepath.IsAbs(p) || c.Dir == "" {
		return p
	}
	return filepath.Join(c.Dir, p)
}

// RateLimitOf returns the rate limit of an analyst: their own, else the
// config's default, else nil (no limit).
func (c *Config) RateLimitOf(analyst string) *RateLimit {
	if a, ok := c.Analysts[analyst]; ok && a.RateLimit != nil {
		return a.RateLimit
	}
	return c.RateLimit
}

// MayQuery reports whether the analyst may query the dataset.
func (a Analyst) MayQuery(dataset string) bool {
	if len(a.Datasets) == 0 {
		return true
	}
	for _, d := range a.Datasets {
		if d == dataset {
			return true
		}
	}
	return false
}

// DefaultDPConcurrencyPerAnalyst is dp_concurrency_per_analyst's default
// for a dataset of slots DP slots: 2, but never more than half the slots
// (at least one), so that one analyst's statements leave a slot to the
// others (attack round 110: with upstream_max_connections 2 the default
// had been both slots, and another analyst's query waited
// dp_queue_timeout behind one analyst's two long statements and was
// refused). With a single slot there is nothing to share.
func DefaultDPConcurrencyPerAnalyst(slots int) int {
	return max(1, min(2, slots/2))
}

// DefaultMaxConnectionsPerAnalyst is max_connections_per_analyst's
// default for a proxy of total client connections: a quarter of them, at
// least 2 (psql's one and a BI tool's second, for metadata), but never
// all of them when there are two or more, so that one analyst's idle
// sessions always leave the others a session (the shape of attack round
// 110, for sessions: with max_connections 2 the default had been both).
func DefaultMaxConnectionsPerAnalyst(total int) int {
	if total <= 1 {
		return 1
	}
	return min(max(2, total/4), total-1)
}
