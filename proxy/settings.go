package proxy

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/release"
	"github.com/jackc/pgx/v5/pgproto3"
)

// settingDef describes one run-time setting the proxy keeps per session.
// The table below is read-only.
type settingDef struct {
	name     string // as SHOW prints it, e.g. "DateStyle"
	def      string // default ("" with defFunc)
	report   bool   // sent in ParameterStatus (GUC_REPORT in PostgreSQL)
	readOnly bool   // cannot be SET
	// shadow settings are also applied to the session's shadow connection,
	// so catalog statements see the same TimeZone, search_path, …; never
	// statement_timeout, lock_timeout or the read-only settings, which are
	// the shadow pool's own (internal/shadow, "Connection pooling"): the
	// session's statement_timeout is enforced by the proxy for catalog
	// statements as for DP ones (statementContext, watchShadow).
	shadow bool
	// check validates a new value and returns its canonical form.
	check func(s *session, v string) (string, error)
	desc  string
}

// Names of the DP settings.
const (
	settingEpsilon      = "dp.epsilon"
	settingDelta        = "dp.delta"
	settingMechanism    = "dp.mechanism"
	settingCache        = "dp.cache"
	settingBias         = "dp.bias"
	settingContribution = "dp.contribution"
	settingClipping     = "dp.clipping"
	settingBudget       = "dp.budget"
	// settingErrorColumns adds each released column's 95% half-widths as
	// a column after it (pipeline.Settings.ErrorColumns).
	settingErrorColumns = "dp.error_columns"
	// settingLastAnswer is SHOW dp.last_answer: what the session's last
	// DP answer cost and how far to trust it, as rows.
	settingLastAnswer = "dp.last_answer"
)

var settingDefs = func() map[string]*settingDef {
	defs := []*settingDef{
		{name: "application_name", report: true, shadow: true, check: checkApplicationName, desc: "Sets the application name to be reported in statistics and logs."},
		{name: "client_encoding", def: "UTF8", report: true, check: checkClientEncoding, desc: "Sets the client's character set encoding."},
		{name: "DateStyle", def: "ISO, MDY", report: true, shadow: true, check: checkDateStyle, desc: "Sets the display format for date and time values."},
		{name: "IntervalStyle", def: "postgres", report: true, shadow: true, check: enum("postgres", "postgres_verbose", "sql_standard", "iso_8601"), desc: "Sets the display format for interval values."},
		{name: "TimeZone", def: "UTC", report: true, shadow: true, check: checkTimeZone, desc: "Sets the time zone for displaying and interpreting time stamps."},
		{name: "integer_datetimes", def: "on", report: true, readOnly: true, desc: "Shows whether datetimes are integer based."},
		{name: "standard_conforming_strings", def: "on", report: true, check: onlyOn("dpproxy parses SQL with standard conforming strings"), desc: "Causes '...' strings to treat backslashes literally."},
		{name: "server_version", report: true, readOnly: true, desc: "Shows the server version."},
		{name: "server_version_num", readOnly: true, desc: "Shows the server version as an integer."},
		{name: "server_encoding", def: "UTF8", report: true, readOnly: true, desc: "Shows the server (database) character set encoding."},
		{name: "is_superuser", def: "off", report: true, readOnly: true, desc: "Shows whether the current user is a superuser."},
		{name: "session_authorization", report: true, readOnly: true, desc: "Sets the session user name."},
		{name: "default_transaction_read_only", def: "off", report: true, check: checkBool, desc: "Sets the default read-only status of new transactions."},
		{name: "in_hot_standby", def: "off", report: true, readOnly: true, desc: "Shows whether hot standby is currently active."},
		{name: "extra_float_digits", def: "1", shadow: true, check: intRange(-15, 3), desc: "Sets the number of digits displayed for floating-point values."},
		{name: "search_path", def: `"$user", public`, shadow: true, check: checkSearchPath, desc: "Sets the schema search order for names that are not schema-qualified."},
		{name: "statement_timeout", def: "0", check: checkDuration, desc: "Sets the maximum allowed duration of any statement."},
		{name: "lock_timeout", def: "0", check: checkDuration, desc: "Sets the maximum allowed duration of any wait for a lock."},
		{name: "idle_in_transaction_session_timeout", def: "0", check: checkDuration, desc: "Sets the maximum allowed idle time between queries, when in a transaction."},
		{name: "idle_session_timeout", def: "0", check: checkDuration, desc: "Sets the maximum allowed idle time between queries, when not in a transaction."},
		{name: "transaction_isolation", def: "read committed", check: checkIsolation, desc: "Sets the current transaction's isolation level."},
		{name: "default_transaction_isolation", def: "read committed", check: checkIsolation, desc: "Sets the transaction isolation level of each new transaction."},
		{name: "transaction_read_only", def: "off", check: checkBool, desc: "Sets the current transaction's read-only status."},
		{name: "bytea_output", def: "hex", shadow: true, check: enum("hex", "escape"), desc: "Sets the output format for bytea."},
		{name: "client_min_messages", def: "notice", shadow: true, check: enum("debug5", "debug4", "debug3", "debug2", "debug1", "log", "notice", "warning", "error"), desc: "Sets the message levels that are sent to the client."},
		{name: "xmloption", def: "content", shadow: true, check: enum("content", "document"), desc: "Sets whether XML data in implicit parsing and serialization operations is to be considered as documents or content fragments."},
		{name: "max_identifier_length", def: "63", readOnly: true, desc: "Shows the maximum identifier length."},
		{name: "lc_messages", def: "C", check: anyValue, desc: "Sets the language in which messages are displayed."},
		{name: "lc_monetary", def: "C", check: anyValue, desc: "Sets the locale for formatting monetary amounts."},
		{name: "lc_numeric", def: "C", check: anyValue, desc: "Sets the locale for formatting numbers."},
		{name: "lc_time", def: "C", check: anyValue, desc: "Sets the locale for formatting date and time values."},
		{name: "row_security", def: "on", check: checkBool, desc: "Enable row security."},
		{name: "synchronous_commit", def: "on", check: anyValue, desc: "Sets the current transaction's synchronization level."},
		{name: "jit", def: "on", check: checkBool, desc: "Allow JIT compilation."},
		{name: "work_mem", def: "4MB", check: anyValue, desc: "Sets the maximum memory to be used for query workspaces."},
		{name: "max_parallel_workers_per_gather", def: "2", check: intRange(0, 1024), desc: "Sets the maximum number of parallel processes per executor node."},
		{name: "default_text_search_config", def: "pg_catalog.english", check: anyValue, desc: "Sets default text search configuration."},
		{name: "escape_string_warning", def: "on", check: checkBool, desc: "Warn about backslash escapes in ordinary string literals."},
		{name: "array_nulls", def: "on", check: checkBool, desc: "Enable input of NULL elements in arrays."},
		{name: "quote_all_identifiers", def: "off", check: checkBool, desc: "When generating SQL fragments, quote all identifiers."},
		{name: "geqo", def: "on", check: checkBool, desc: "Enables genetic query optimization."},
		{name: "plan_cache_mode", def: "auto", check: enum("auto", "force_generic_plan", "force_custom_plan"), desc: "Controls the planner's selection of custom or generic plan."},
		{name: settingEpsilon, check: checkEpsilon, desc: "Privacy cost ε of each DP query of this session."},
		{name: settingDelta, check: checkDelta, desc: "Privacy cost δ of each DP query of this session (gaussian mechanism; GROUP BY columns without public values)."},
		{name: settingMechanism, check: checkMechanism, desc: "Noise mechanism of DP queries: laplace or gaussian."},
		{name: settingCache, def: "on", check: checkBool, desc: "Answer a repeated DP query with its earlier noisy answer, at no cost."},
		{name: settingContribution, check: enum(policy.ContributionAuto, policy.ContributionFixed), desc: "Rows per unit of each DP query: auto (chosen by DP within the policy's max_rows_per_unit, for a tenth of the query's ε) or fixed (the policy's)."},
		{name: settingClipping, check: enum(policy.ClippingAuto, policy.ClippingFixed), desc: "Clamping bounds of summed columns: auto (chosen by DP inside the policy's [lower, upper], for a tenth of the query's ε) or fixed (the policy's)."},
		{name: settingErrorColumns, def: "off", check: checkBool, desc: "Add after each released column a column <name>_moe95 with each cell's 95% error half-width (margin of error)."},
		{name: settingBias, def: "on", check: checkBool, desc: "State a DP estimate of the rows contribution bounding removed (costs a tenth of the query's ε)."},
		{name: settingSampleBlocks, check: checkSampleBlocks, desc: "Sample-and-aggregate block count k (empty: chosen from a noisy unit count)."},
		{name: settingMaxRowsPerUnit, check: checkContributionBound(settingMaxRowsPerUnit), desc: "Rows one unit may contribute to one group, tighter than the policy's (empty: the policy's; ungrouped queries: its whole allowance)."},
		{name: settingMaxGroupsPerUnit, check: checkContributionBound(settingMaxGroupsPerUnit), desc: "Groups one unit may contribute to, tighter than the policy's (empty: the policy's)."},
	}
	m := make(map[string]*settingDef, len(defs))
	for _, d := range defs {
		m[strings.ToLower(d.name)] = d
	}
	return m
}()

// settingAliases maps the spellings of SET/SHOW to setting names.
var settingAliases = map[string]string{
	"time zone":                   "timezone",
	"names":                       "client_encoding",
	"transaction isolation level": "transaction_isolation",
	"session authorization":       "session_authorization",
}

func canonicalSetting(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	if a, ok := settingAliases[n]; ok {
		return a
	}
	return n
}

// isCustomSetting reports whether name is an extension-style placeholder
// ("myapp.flag"), which PostgreSQL accepts without validation. dp.* names
// are the proxy's own and must be known.
func isCustomSetting(name string) bool {
	return strings.Contains(name, ".") && !strings.HasPrefix(name, "dp.")
}

func displayName(name string) string {
	if d, ok := settingDefs[name]; ok {
		return d.name
	}
	return name
}

// removedSettings are dp.* settings that were removed, with the hint of
// their 42704 error: what became of what they did. (PostgreSQL, too,
// answers a removed parameter with 42704.)
var removedSettings = map[string]string{
	// Removed 2026-12-06 (issue 28), with sample-and-aggregate quantiles.
	"dp.quantile_method": "dp.quantile_method was removed: quantiles (percentile_cont, percentile_disc, MIN, MAX) always use the exponential mechanism, " +
		"which measured more accurate than the other methods (BENCHMARKS.md, \"Quantiles of expressions\"); drop the SET",
	// Removed 2026-12-06 (issue 28): sample-and-aggregate answers only
	// corr and regr_r2, whose natural ranges suffice.
	"dp.output_range": "dp.output_range was removed: corr and regr_r2 use their natural ranges [-1, 1] and [0, 1], " +
		"and covar_pop, covar_samp, regr_slope and regr_intercept are answered from noisy sums, which need no range; drop the SET",
}

func unknownSetting(name string) error {
	e := pgerr.New(pgerr.UndefinedObject, "unrecognized configuration parameter %q", name)
	if hint, ok := removedSettings[strings.ToLower(name)]; ok {
		return e.WithHint("%s", hint)
	}
	if strings.HasPrefix(strings.ToLower(name), "dp.") {
		var dp []string
		for n, d := range settingDefs {
			if strings.HasPrefix(n, "dp.") {
				dp = append(dp, d.name)
			}
		}
		sort.Strings(dp)
		e = e.WithHint("dpproxy's settings are %s (SHOW ALL lists them with their values)", strings.Join(dp, ", "))
	}
	return e
}

// invalidValue is the 22023 error of a bad setting value; name is the
// setting as SHOW prints it.
func invalidValue(name, value string) *pgerr.Error {
	return pgerr.New(pgerr.InvalidParameterValue, "invalid value for parameter %q: %q", name, value)
}

// defaultSetting returns the default of a setting for this session.
func (s *session) defaultSetting(name string) string {
	switch name {
	case "server_version":
		return s.serverVersion
	case "server_version_num":
		return serverVersionNum(s.serverVersion)
	case "session_authorization":
		return s.analyst
	case settingEpsilon:
		return formatFloat(s.ds.Policy.Defaults.Epsilon)
	case settingDelta:
		return formatFloat(s.ds.Policy.Defaults.Delta)
	case settingMechanism:
		if m := s.ds.Policy.Defaults.Mechanism; m != "" {
			return m
		}
		return policy.MechanismLaplace
	case settingContribution:
		if m := s.ds.Policy.Defaults.Contribution; m != "" {
			return m
		}
		return policy.ContributionFixed
	case settingClipping:
		if m := s.ds.Policy.Defaults.Clipping; m != "" {
			return m
		}
		return policy.ClippingFixed
	}
	if d, ok := settingDefs[name]; ok {
		return d.def
	}
	return ""
}

// serverVersionNum turns "15.0 (dpproxy)" into "150000".
func serverVersionNum(v string) string {
	f := strings.FieldsFunc(v, func(r rune) bool { return r == '.' || r == ' ' })
	if len(f) < 2 {
		return "150000"
	}
	major, err1 := strconv.Atoi(f[0])
	minor, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return "150000"
	}
	return strconv.Itoa(major*10000 + minor)
}

// initSettings applies the start-up parameters to the defaults
// (newSession): PostgreSQL treats them, and "-c name=value" in options,
// as SETs.
func (s *session) initSettings(sp *startupPacket) error {
	if v := sp.params["fallback_application_name"]; v != "" {
		s.settings["application_name"], _ = checkApplicationName(s, v)
	}
	apply := func(k, v string) error {
		name := canonicalSetting(k)
		if name == "client_encoding" {
			// libpq derives client_encoding from the locale (SQL_ASCII in
			// the C locale); ASCII is a subset of UTF8, which is all the
			// proxy sends.
			if n := encodingName(v); n == "sqlascii" || n == "auto" {
				return nil
			}
		}
		return s.set(name, v, false, false)
	}
	for _, k := range sp.order {
		switch k {
		case "user", "database", "replication", "fallback_application_name", "options":
			continue
		}
		if strings.HasPrefix(k, "_pq_.") {
			continue
		}
		if err := apply(k, sp.params[k]); err != nil {
			return err
		}
	}
	opts, err := parseOptions(sp.params["options"])
	if err != nil {
		return err
	}
	for _, kv := range opts {
		if err := apply(kv[0], kv[1]); err != nil {
			return err
		}
	}
	// They are the session's own settings, in no transaction: the first
	// transaction starts from them (a ROLLBACK had restored the defaults
	// from before them).
	s.txBegin, s.txCommit = nil, nil
	return nil
}

// parseOptions parses the "options" start-up parameter: "-c name=value" and
// "--name=value", separated by spaces, with backslash escapes (libpq's
// PGOPTIONS).
func parseOptions(s string) ([][2]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	var out [][2]string
	bad := func(w string) ([][2]string, error) {
		return nil, pgerr.New(pgerr.FeatureNotSupported, "unsupported command-line option %q in the options parameter", w).
			WithHint(`only "-c name=value" and "--name=value" are supported`)
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		var kv string
		switch {
		case w == "-c" && i+1 < len(words):
			i++
			kv = words[i]
		case strings.HasPrefix(w, "-c") && len(w) > 2:
			kv = w[2:]
		case strings.HasPrefix(w, "--"):
			kv = w[2:]
		default:
			return bad(w)
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return bad(w)
		}
		out = append(out, [2]string{strings.ReplaceAll(k, "-", "_"), v})
	}
	return out, nil
}

// set validates and stores a setting. local is SET LOCAL (undone at the end
// of the transaction); isDefault is SET … TO DEFAULT.
func (s *session) set(name, value string, isDefault, local bool) error {
	d, known := settingDefs[name]
	if !known && !isCustomSetting(name) {
		return unknownSetting(name)
	}
	if known && d.readOnly {
		if name == "session_authorization" {
			return pgerr.New(pgerr.InsufficientPrivilege, "permission denied to set session authorization")
		}
		return pgerr.New(cantChangeRuntimeParam, "parameter %q cannot be changed", d.name)
	}
	v := value
	if isDefault {
		v = s.defaultSetting(name)
	} else if known && d.check != nil {
		var err error
		if v, err = d.check(s, value); err != nil {
			return named(d.name, value, err)
		}
	}
	if err := checkSettingsRoom(s.settings, name, v, known); err != nil {
		return err
	}
	s.changingSettings()
	if !local {
		// COMMIT keeps these: bounded as the session's own (attack round
		// 36: SET then SET LOCAL of the same name grew them unchecked).
		if err := checkSettingsRoom(s.txCommit, name, v, known); err != nil {
			return err
		}
	}
	s.put(name, v, local)
	return nil
}

// put stores a checked setting in the open transaction: its commit keeps
// it unless local (SET LOCAL).
func (s *session) put(name, v string, local bool) {
	s.changingSettings()
	s.settings[name] = v
	if !local {
		s.txCommit[name] = v
	}
}

// A session's settings live in the proxy's memory, and every savepoint
// and transaction keeps a copy: placeholder settings ("x.k", which any
// SET may create, as in PostgreSQL) are at most maxCustomSettings, and all
// names and values together at most maxSettingsBytes (attack round 35:
// 200 SETs of 512 KiB held 106 MiB). Beyond, SET fails with 54000.
const (
	maxCustomSettings = 1000
	maxSettingsBytes  = 64 << 10
)

// checkSettingsRoom reports whether setting name to v keeps the settings
// m (the session's, or those its transaction's COMMIT keeps) within their
// bounds. A change that does not make them larger is always allowed (so
// RESET works whatever they hold).
func checkSettingsRoom(m map[string]string, name, v string, known bool) error {
	old, had := m[name]
	if had && len(v) <= len(old) {
		return nil // no walk when nothing grows
	}
	size, custom := settingsBytes(m), 0
	if had {
		size -= len(name) + len(old)
	}
	if size+len(name)+len(v) > maxSettingsBytes {
		return pgerr.New(programLimitExceeded, "the session's settings would exceed %d bytes", maxSettingsBytes).
			WithHint("use shorter values, or RESET the settings you no longer need")
	}
	if known || had {
		return nil
	}
	for n := range m {
		if _, ok := settingDefs[n]; !ok {
			custom++
		}
	}
	if custom >= maxCustomSettings {
		return pgerr.New(programLimitExceeded, "a session can have at most %d placeholder settings", maxCustomSettings).
			WithHint("RESET ALL, or RESET the placeholder settings you no longer need")
	}
	return nil
}

// settingsBytes is the length of a settings map's names and values.
func settingsBytes(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}

// reset restores a setting (or all settings) to its default.
func (s *session) reset(name string) error {
	if name == "all" {
		s.changingSettings()
		for n, d := range settingDefs {
			if !d.readOnly {
				_ = s.set(n, "", true, false)
			}
		}
		for n := range s.settings {
			if _, known := settingDefs[n]; !known {
				delete(s.settings, n)
				delete(s.txCommit, n)
			}
		}
		return nil
	}
	d, known := settingDefs[name]
	if known && d.readOnly {
		// RESET SESSION AUTHORIZATION (sent by poolers) and the like:
		// the value is already the only one there is.
		return nil
	}
	if !known {
		if isCustomSetting(name) {
			// Within the settings' bounds, as SET (attack round 51:
			// RESET of new placeholders grew them without limit).
			return s.set(name, "", true, false)
		}
		return unknownSetting(name)
	}
	return s.set(name, "", true, false)
}

// reportedSettings are the names of the settings sent in ParameterStatus,
// sorted (computed once; read-only).
var reportedSettings = func() []string {
	var names []string
	for n, d := range settingDefs {
		if d.report {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}()

// reportChanges calls send for every reported setting whose value the
// client has not been sent yet, and records it as sent. PostgreSQL 14+
// sends these ParameterStatus messages just before ReadyForQuery.
func (s *session) reportChanges(send func(name, value string)) {
	for _, n := range reportedSettings {
		v := s.settings[n]
		if old, seen := s.reported[n]; seen && old == v {
			continue
		}
		s.reported[n] = v
		send(settingDefs[n].name, v)
	}
}

// sendParameterStatus sends ParameterStatus for every reported setting
// whose value the client has not seen yet.
func (c *conn) sendParameterStatus() {
	c.sess.reportChanges(func(name, value string) {
		c.be.Send(&pgproto3.ParameterStatus{Name: name, Value: value})
	})
}

// statementTimeout returns statement_timeout in milliseconds.
func (s *session) statementTimeout() int64 {
	v := s.settings["statement_timeout"]
	if v == "0" {
		return 0 // the default, asked for by every statement
	}
	ms, _ := parseDurationMillis(v)
	return ms
}

// messageRank orders the client_min_messages levels (read-only).
var messageRank = map[string]int{"debug5": 0, "debug4": 0, "debug3": 0, "debug2": 0, "debug1": 0, "log": 1, "notice": 2, "warning": 3, "error": 4}

// wantsMessages reports whether client_min_messages lets a message of the
// given severity through. Errors always pass.
func (s *session) wantsMessages(severity string) bool {
	min := messageRank[s.settings["client_min_messages"]]
	switch severity {
	case severityNotice:
		return min <= 2
	case severityWarning:
		return min <= 3
	}
	return true
}

// Session DP parameters (validated when set).
func (s *session) epsilon() float64 {
	v, _ := strconv.ParseFloat(s.settings[settingEpsilon], 64)
	return v
}

func (s *session) delta() float64 {
	v, _ := strconv.ParseFloat(s.settings[settingDelta], 64)
	return v
}

func (s *session) mechanism() string { return s.settings[settingMechanism] }

// noCache is true after SET dp.cache = off.
func (s *session) noCache() bool { return s.settings[settingCache] == "off" }

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Checks of setting values.

func anyValue(_ *session, v string) (string, error) { return v, nil }

// checkSearchPath refuses what PostgreSQL's list syntax refuses
// (SplitIdentifierString): identifiers separated by commas, each a
// double-quoted name ("" for a quote, not empty) or an unquoted word. A
// value the proxy kept but the shadow refused would leave a pooled
// connection's previous value in place (attack round 35).
func checkSearchPath(_ *session, v string) (string, error) {
	bad := func() (string, error) {
		return "", invalidValue("search_path", v).WithDetail("List syntax is invalid.").
			WithHint(`list schema names separated by commas, e.g. SET search_path = public, "My Schema"`)
	}
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' }
	i := 0
	skip := func() {
		for i < len(v) && isSpace(v[i]) {
			i++
		}
	}
	skip()
	if i == len(v) {
		return v, nil // an empty list
	}
	for {
		if v[i] == '"' {
			n := 0
			for i++; ; i++ {
				if i == len(v) {
					return bad() // no closing quote
				}
				if v[i] == '"' {
					if i+1 < len(v) && v[i+1] == '"' {
						i++
						n++
						continue
					}
					i++
					break
				}
				n++
			}
			if n == 0 {
				return bad() // a zero-length delimited identifier
			}
		} else {
			start := i
			for i < len(v) && v[i] != ',' && !isSpace(v[i]) {
				i++
			}
			if i == start {
				return bad()
			}
		}
		skip()
		if i == len(v) {
			return v, nil
		}
		if v[i] != ',' {
			return bad()
		}
		i++
		skip()
		if i == len(v) {
			return bad() // a trailing comma
		}
	}
}

func checkApplicationName(_ *session, v string) (string, error) {
	// PostgreSQL keeps printable ASCII only and truncates to NAMEDATALEN-1.
	b := []byte(v)
	for i, ch := range b {
		if ch < 32 || ch > 126 {
			b[i] = '?'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return string(b), nil
}

// encodingName normalises an encoding name as PostgreSQL's
// clean_encoding_name does (src/common/encnames.c): letters and digits
// only, lower case — so asyncpg's "'utf-8'" is utf8.
func encodingName(v string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(v) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func checkClientEncoding(_ *session, v string) (string, error) {
	switch encodingName(v) {
	case "utf8", "unicode":
		return "UTF8", nil
	}
	return "", invalidValue("client_encoding", v).WithHint("dpproxy speaks UTF8 only; use SET client_encoding = 'UTF8'")
}

func checkBool(_ *session, v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "yes", "1", "t", "y":
		return "on", nil
	case "off", "false", "no", "0", "f", "n":
		return "off", nil
	}
	return "", pgerr.New(pgerr.InvalidParameterValue, "parameter requires a Boolean value").WithHint("use on or off")
}

func onlyOn(why string) func(*session, string) (string, error) {
	return func(s *session, v string) (string, error) {
		b, err := checkBool(s, v)
		if err != nil || b != "on" {
			return "", pgerr.New(pgerr.InvalidParameterValue, "only \"on\" is supported").WithHint("%s", why)
		}
		return b, nil
	}
}

func enum(values ...string) func(*session, string) (string, error) {
	return func(_ *session, v string) (string, error) {
		l := strings.ToLower(strings.TrimSpace(v))
		for _, x := range values {
			if l == x {
				return x, nil
			}
		}
		return "", pgerr.New(pgerr.InvalidParameterValue, "invalid value %q", v).
			WithHint("Available values: %s.", strings.Join(values, ", "))
	}
}

func intRange(lo, hi int) func(*session, string) (string, error) {
	return func(_ *session, v string) (string, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return "", pgerr.New(pgerr.InvalidParameterValue, "invalid value %q: an integer is required", v)
		}
		if n < lo || n > hi {
			return "", pgerr.New(pgerr.InvalidParameterValue, "%d is outside the valid range (%d .. %d)", n, lo, hi)
		}
		return strconv.Itoa(n), nil
	}
}

func checkIsolation(_ *session, v string) (string, error) {
	l := strings.Join(strings.Fields(strings.ToLower(strings.ReplaceAll(v, "-", " "))), " ")
	switch l {
	case "read uncommitted", "read committed", "repeatable read", "serializable":
		return l, nil
	}
	return "", pgerr.New(pgerr.InvalidParameterValue, "invalid value %q", v).
		WithHint("Available values: serializable, repeatable read, read committed, read uncommitted.")
}

func checkDateStyle(s *session, v string) (string, error) {
	style, order := "ISO", "MDY"
	if cur := strings.Split(s.settings["datestyle"], ", "); len(cur) == 2 {
		style, order = cur[0], cur[1]
	}
	styleSet, orderSet := false, false
	for _, tok := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		switch strings.ToLower(tok) {
		case "iso":
			style, styleSet = "ISO", true
		case "sql":
			style, styleSet = "SQL", true
		case "postgres":
			style, styleSet = "Postgres", true
		case "german":
			style, styleSet = "German", true
			if !orderSet {
				order = "DMY"
			}
		case "dmy", "euro", "european":
			order, orderSet = "DMY", true
		case "mdy", "us", "noneuro", "noneuropean":
			order, orderSet = "MDY", true
		case "ymd":
			order, orderSet = "YMD", true
		case "default":
			style, order = "ISO", "MDY"
		default:
			return "", invalidValue("DateStyle", v).WithHint("Unrecognized key word: %q.", tok)
		}
	}
	_ = styleSet
	return style + ", " + order, nil
}

func checkTimeZone(_ *session, v string) (string, error) {
	t := strings.TrimSpace(v)
	switch strings.ToLower(t) {
	case "utc", "gmt", "z", "zulu", "universal":
		return strings.ToUpper(t), nil
	case "local", "default":
		return "UTC", nil
	}
	if isOffset(t) {
		return t, nil
	}
	if strings.ContainsAny(t, "\x00") || strings.Contains(t, "..") {
		return "", invalidValue("TimeZone", v)
	}
	if _, err := time.LoadLocation(t); err == nil {
		return t, nil
	}
	return "", invalidValue("TimeZone", v).WithHint("use a time zone name such as UTC or Europe/Paris, or an offset such as +02")
}

// isOffset accepts numeric UTC offsets: "+02", "-5", "+05:30", "3.5".
func isOffset(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '+' || s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != ':' && r != '.' {
			return false
		}
	}
	return true
}

// checkDuration accepts PostgreSQL's duration forms for millisecond
// settings: an integer (milliseconds) or a number with a unit (us, ms, s,
// min, h, d) and returns the canonical text SHOW prints.
func checkDuration(_ *session, v string) (string, error) {
	ms, err := parseDurationMillis(v)
	if err != nil {
		return "", pgerr.New(pgerr.InvalidParameterValue, "invalid value %q", v).
			WithHint(`Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".`)
	}
	return formatDurationMillis(ms), nil
}

func parseDurationMillis(v string) (int64, error) {
	t := strings.TrimSpace(v)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.' || (i == 0 && (t[i] == '-' || t[i] == '+'))) {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("bad duration %q", v)
	}
	mult := map[string]float64{"": 1, "us": 0.001, "ms": 1, "s": 1000, "min": 60000, "h": 3600000, "d": 86400000}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("bad unit %q", unit)
	}
	ms := f * mult
	if ms > math.MaxInt32 {
		return 0, fmt.Errorf("duration too large")
	}
	return int64(math.Round(ms)), nil
}

func formatDurationMillis(ms int64) string {
	if ms == 0 {
		return "0"
	}
	for _, u := range []struct {
		n    int64
		name string
	}{{86400000, "d"}, {3600000, "h"}, {60000, "min"}, {1000, "s"}} {
		if ms%u.n == 0 {
			return strconv.FormatInt(ms/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(ms, 10) + "ms"
}

// checkEpsilon: 0 < ε ≤ the analyst's budget on this dataset, finite.
func checkEpsilon(s *session, v string) (string, error) {
	limit := s.ds.Policy.AnalystBudget(s.analyst).Epsilon
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f > limit {
		// The hint names the limit with the steward's grants, whichever
		// way the value is wrong (the new-user run: "abc" named the
		// policy's 3 where "9" named the granted 8).
		limit = s.limit().Epsilon
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > limit {
		return "", invalidValue(settingEpsilon, v).
			WithHint("dp.epsilon must be a number with 0 < epsilon <= %s (your budget's limit on %s; SHOW dp.budget says what remains)", formatFloat(limit), s.ds.Policy.Name)
	}
	if err := checkEpsilonFloor(s, f, v); err != nil {
		return "", err
	}
	return formatFloat(f), nil
}

// checkEpsilonFloor refuses an ε below the dataset's floor on ε per query
// (budget.min_epsilon_per_query; issue 14: a query at a tiny ε is free to
// repeat, and its noise scale is beyond exact float64 arithmetic). The
// release path checks the floor again before any charge.
func checkEpsilonFloor(s *session, f float64, v string) error {
	if f < s.ds.Policy.Budget.EpsilonFloor() {
		return invalidValue(settingEpsilon, v).WithHint("%s", release.EpsilonFloorHint(s.ds.Policy))
	}
	return nil
}

// checkDelta: 0 ≤ δ < 1 and δ ≤ the analyst's δ budget, finite.
func checkDelta(s *session, v string) (string, error) {
	limit := s.ds.Policy.AnalystBudget(s.analyst).Delta
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err == nil && f > limit {
		limit = s.limit().Delta
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f >= 1 || f > limit {
		return "", invalidValue(settingDelta, v).
			WithHint("dp.delta must be a number with 0 <= delta <= %s (your budget's limit on %s; SHOW dp.budget says what remains)", formatFloat(limit), s.ds.Policy.Name)
	}
	return formatFloat(f), nil
}

func checkMechanism(s *session, v string) (string, error) {
	switch m := strings.ToLower(strings.TrimSpace(v)); m {
	case policy.MechanismLaplace:
		return m, nil
	case policy.MechanismGaussian:
		if s.ds.Policy.AnalystBudget(s.analyst).Delta <= 0 {
			return "", invalidValue(settingMechanism, v).
				WithHint("the gaussian mechanism needs a δ budget, and %s has none; use laplace", s.ds.Policy.Name)
		}
		return m, nil
	}
	return "", invalidValue(settingMechanism, v).WithHint("use laplace or gaussian")
}

// limit is the analyst's budget limit on the session's dataset: the
// policy's, or the one grantedLimit reads when a steward's grant raised
// it. SET dp.epsilon and dp.delta ask for it only for a value above the
// policy's limit or not a number; the ledger still checks every charge.
func (s *session) limit() accountant.Spent {
	if s.grantedLimit != nil {
		return s.grantedLimit()
	}
	return s.policyLimit()
}

// policyLimit is the analyst's budget limit in the dataset's policy.
func (s *session) policyLimit() accountant.Spent {
	b := s.ds.Policy.AnalystBudget(s.analyst)
	return accountant.Spent{Epsilon: b.Epsilon, Delta: b.Delta}
}

// grantedLimit is the analyst's budget limit on this dataset: the
// policy's, or what the ledger holds when a steward's grant raised it
// (`dpproxy budget grant`). SET dp.epsilon and dp.delta read it only for
// a value above the policy's limit or not a number; the ledger still
// checks every charge.
// When the ledger cannot be read, the policy's limit stands.
func (c *conn) grantedLimit() accountant.Spent {
	limit := c.sess.policyLimit()
	if c.srv.cfg.Ledger == nil {
		return limit
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.budgetStatus(ctx, c.sess.ds.Policy)
	if err != nil {
		return limit
	}
	limit.Epsilon = math.Max(limit.Epsilon, st.Limit.Epsilon)
	limit.Delta = math.Max(limit.Delta, st.Limit.Delta)
	return limit
}

// named gives a check's 22023 error the parameter's name, as PostgreSQL's
// "invalid value for parameter" does (the enum and range checks do not
// know the name they check).
func named(name, value string, err error) error {
	e, ok := pgerr.As(err)
	if !ok || e.Code != pgerr.InvalidParameterValue {
		return err
	}
	out := *e
	if e.Message == "parameter requires a Boolean value" {
		out.Message = fmt.Sprintf("parameter %q requires a Boolean value", name)
		return &out
	}
	if !strings.HasPrefix(e.Message, "invalid value \"") {
		return err
	}
	out.Message = invalidValue(name, value).Message + strings.TrimPrefix(e.Message, "invalid value "+strconv.Quote(value))
	return &out
}
