package pgsql

import (
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// SessionKind is the kind of a session statement.
type SessionKind int

// Session statement kinds.
const (
	SessionSet             SessionKind = iota // SET [SESSION|LOCAL] name {=|TO} value; SET TIME ZONE v; SET NAMES v
	SessionReset                              // RESET name | RESET ALL
	SessionShow                               // SHOW name | SHOW ALL
	SessionBegin                              // BEGIN | START TRANSACTION [modes]
	SessionCommit                             // COMMIT | END
	SessionRollback                           // ROLLBACK | ABORT
	SessionDiscard                            // DISCARD ALL|PLANS|SEQUENCES|TEMP
	SessionDeallocate                         // DEALLOCATE [PREPARE] name|ALL
	SessionCharacteristics                    // SET SESSION CHARACTERISTICS AS TRANSACTION …
	SessionSavepoint                          // SAVEPOINT name
	SessionRelease                            // RELEASE [SAVEPOINT] name
	SessionRollbackTo                         // ROLLBACK [WORK|TRANSACTION] TO [SAVEPOINT] name
	SessionUnlisten                           // UNLISTEN channel | * (Name: the channel, "*" for all)
	SessionUnlockAll                          // SELECT pg_advisory_unlock_all()
	SessionDeclare                            // DECLARE name … CURSOR … FOR query (Cursor)
	SessionFetch                              // FETCH [direction] [FROM|IN] name (Cursor)
	SessionMove                               // MOVE [direction] [FROM|IN] name (Cursor)
	SessionClose                              // CLOSE name | ALL (Cursor)
	SessionCopy                               // COPY ( query ) TO STDOUT [options] (Copy)
	SessionPrepare                            // PREPARE name [(types)] AS query (Name, Value: the query, Args: the types)
	SessionExecute                            // EXECUTE name [(constants)] (Name, Args: the constants' SQL)
)

// SessionStmt is a parsed session statement.
type SessionStmt struct {
	Kind SessionKind
	// Name is the lower-case setting name: "dp.epsilon", "application_name",
	// "timezone" (for SET/SHOW/RESET TIME ZONE), "client_encoding" (SET
	// NAMES), "search_path" (SET SCHEMA), "transaction_isolation" (SHOW
	// TRANSACTION ISOLATION LEVEL), "transaction" (SET TRANSACTION and SET
	// SESSION CHARACTERISTICS AS TRANSACTION, with the modes in Value),
	// "all"…; for DISCARD the target (all, plans, sequences, temp) and for
	// DEALLOCATE the statement name or "all".
	Name string
	// Value is the SET value as text with quotes removed ("DEFAULT" is
	// reported as Default=true); several comma-separated values are joined
	// with ", ". For BEGIN/START TRANSACTION and the transaction forms of
	// SET it holds the normalized modes, e.g.
	// "isolation level serializable, read only" ("" when none).
	Value   string
	Default bool
	Local   bool // SET LOCAL
	// Cursor is the DECLARE, FETCH, MOVE or CLOSE (cursor.go).
	Cursor *CursorStmt
	// Copy is the COPY ( query ) TO STDOUT (copy.go).
	Copy *CopyStmt
	// Alias is the result column's name of SELECT pg_advisory_unlock_all().
	Alias string
	// Args are PREPARE's parameter types and EXECUTE's arguments, each
	// the SQL text of one constant (a number, a string, a typed literal,
	// NULL, TRUE or FALSE).
	Args []string
}

// ParseSession parses a session statement (a statement Classify routed to
// RouteSession). Accepted forms (keywords case-insensitive):
//
//	SET [SESSION|LOCAL] name {TO|=} value[, value…] | DEFAULT
//	SET [SESSION|LOCAL] TIME ZONE value|LOCAL|DEFAULT   → Name "timezone"
//	SET [SESSION|LOCAL] NAMES value                     → Name "client_encoding"
//	SET [SESSION|LOCAL] SCHEMA value                    → Name "search_path"
//	SET SESSION CHARACTERISTICS AS TRANSACTION modes    → Kind SessionCharacteristics, Name "transaction", Value modes
//	SET TRANSACTION modes                               → Kind SessionSet, Name "transaction", Value modes, Local
//	RESET name | TIME ZONE | ALL
//	SHOW name | TIME ZONE | TRANSACTION ISOLATION LEVEL | SESSION AUTHORIZATION | ALL
//	BEGIN [WORK|TRANSACTION] [modes] | START TRANSACTION [modes]   → Value modes
//	COMMIT|END [WORK|TRANSACTION] [AND NO CHAIN]
//	ROLLBACK|ABORT [WORK|TRANSACTION] [AND NO CHAIN]
//	DISCARD ALL|PLANS|SEQUENCES|TEMP|TEMPORARY           → Name
//	DEALLOCATE [PREPARE] name|ALL                        → Name
//	UNLISTEN channel|*                                   → Name
//	SELECT pg_advisory_unlock_all() [[AS] alias]         → Alias
//	DECLARE, FETCH, MOVE, CLOSE                          → Cursor (cursor.go)
//	COPY ( query ) TO STDOUT [options]                   → Copy (copy.go)
//
// Names may be dotted (dp.epsilon). Transaction modes are normalized to lower
// case and joined with ", " (e.g. "isolation level serializable, read only").
// Unquoted identifier values are folded to lower case, as PostgreSQL does;
// quoted strings keep their case. Malformed input is a 42601 error with the
// position of the offending token.
func ParseSession(stmt string) (*SessionStmt, error) {
	toks, err := Lex(stmt)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, SyntaxErr(stmt, 0, "empty session statement")
	}
	p := &sessParser{src: stmt, toks: toks}
	s, err := p.parse()
	if err != nil {
		return nil, err
	}
	if p.i < len(toks) {
		return nil, p.errAt("syntax error at or near %q", p.text(p.i))
	}
	return s, nil
}

type sessParser struct {
	src  string
	toks []Token
	i    int
}

func (p *sessParser) text(i int) string {
	if i >= len(p.toks) {
		return "end of input"
	}
	return p.src[p.toks[i].Pos:p.toks[i].End]
}

func (p *sessParser) errAt(format string, args ...any) *pgerr.Error {
	off := len(p.src)
	if p.i < len(p.toks) {
		off = p.toks[p.i].Pos
	}
	return SyntaxErr(p.src, off, format, args...)
}

func (p *sessParser) peek(kw string) bool { return p.i < len(p.toks) && p.toks[p.i].Is(kw) }

func (p *sessParser) accept(kw string) bool {
	if p.peek(kw) {
		p.i++
		return true
	}
	return false
}

func (p *sessParser) expect(kw string) error {
	if !p.accept(kw) {
		return p.errAt("syntax error at or near %q: expected %s", p.text(p.i), strings.ToUpper(kw))
	}
	return nil
}

func (p *sessParser) atEnd() bool { return p.i >= len(p.toks) }

func (p *sessParser) parse() (*SessionStmt, error) {
	kw := p.toks[0]
	p.i = 1
	switch {
	case kw.Is("set"):
		return p.set()
	case kw.Is("reset"):
		name, err := p.settingName(true)
		if err != nil {
			return nil, err
		}
		return &SessionStmt{Kind: SessionReset, Name: name}, nil
	case kw.Is("show"):
		if p.accept("transaction") {
			if err := p.expect("isolation"); err != nil {
				return nil, err
			}
			if err := p.expect("level"); err != nil {
				return nil, err
			}
			return &SessionStmt{Kind: SessionShow, Name: "transaction_isolation"}, nil
		}
		if p.accept("session") {
			if err := p.expect("authorization"); err != nil {
				return nil, err
			}
			return &SessionStmt{Kind: SessionShow, Name: "session_authorization"}, nil
		}
		name, err := p.settingName(true)
		if err != nil {
			return nil, err
		}
		return &SessionStmt{Kind: SessionShow, Name: name}, nil
	case kw.Is("begin"):
		if !p.accept("work") {
			p.accept("transaction")
		}
		modes, err := p.modes()
		if err != nil {
			return nil, err
		}
		return &SessionStmt{Kind: SessionBegin, Value: modes}, nil
	case kw.Is("start"):
		if err := p.expect("transaction"); err != nil {
			return nil, err
		}
		modes, err := p.modes()
		if err != nil {
			return nil, err
		}
		return &SessionStmt{Kind: SessionBegin, Value: modes}, nil
	case kw.Is("savepoint"):
		name, err := p.savepointName()
		if err != nil {
			return nil, err
		}
		return &SessionStmt{Kind: SessionSavepoint, Name: name}, nil
	case kw.Is("release"):
		p.accept("savepoint")
		name, err := p.savepointName()
		if err != nil {
			return nil, err
		}
		return &SessionStmt{Kind: SessionRelease, Name: name}, nil
	case kw.Is("commit"), kw.Is("end"), kw.Is("rollback"), kw.Is("abort"):
		if !p.accept("work") {
			p.accept("transaction")
		}
		if (kw.Is("rollback") || kw.Is("abort")) && p.accept("to") {
			p.accept("savepoint")
			name, err := p.savepointName()
			if err != nil {
				return nil, err
			}
			return &SessionStmt{Kind: SessionRollbackTo, Name: name}, nil
		}
		if p.accept("and") {
			p.accept("no")
			if !p.toks[p.i-1].Is("no") {
				return nil, pgerr.New(pgerr.FeatureNotSupported, "AND CHAIN is not supported").
					WithPosition(CharPos(p.src, p.toks[p.i-1].Pos)).
					WithHint("end the transaction and start a new one with BEGIN")
			}
			if err := p.expect("chain"); err != nil {
				return nil, err
			}
		}
		k := SessionCommit
		if kw.Is("rollback") || kw.Is("abort") {
			k = SessionRollback
		}
		return &SessionStmt{Kind: k}, nil
	case kw.Is("discard"):
		for _, w := range []string{"all", "plans", "sequences", "temp", "temporary"} {
			if p.accept(w) {
				if w == "temporary" {
					w = "temp"
				}
				return &SessionStmt{Kind: SessionDiscard, Name: w}, nil
			}
		}
		return nil, p.errAt("syntax error at or near %q: expected ALL, PLANS, SEQUENCES or TEMP", p.text(p.i))
	case kw.Is("unlisten"):
		if !p.atEnd() && p.toks[p.i].IsOp("*") {
			p.i++
			return &SessionStmt{Kind: SessionUnlisten, Name: "*"}, nil
		}
		name, err := p.cursorName()
		if err != nil {
			return nil, err
		}
		return &SessionStmt{Kind: SessionUnlisten, Name: name}, nil
	case kw.Is("select") && isUnlockAll(p.toks):
		alias, _ := unlockAll(p.toks)
		p.i = len(p.toks)
		return &SessionStmt{Kind: SessionUnlockAll, Alias: alias}, nil
	case kw.Is("declare"):
		cs, err := parseDeclare(p.src, p.toks)
		if err != nil {
			return nil, err
		}
		p.i = len(p.toks)
		return &SessionStmt{Kind: SessionDeclare, Name: cs.Name, Cursor: cs}, nil
	case kw.Is("fetch"), kw.Is("move"):
		cs, err := p.parseFetch()
		if err != nil {
			return nil, err
		}
		k := SessionFetch
		if kw.Is("move") {
			k = SessionMove
		}
		return &SessionStmt{Kind: k, Name: cs.Name, Cursor: cs}, nil
	case kw.Is("close"):
		if p.accept("all") {
			return &SessionStmt{Kind: SessionClose, Cursor: &CursorStmt{All: true}}, nil
		}
		name, err := p.cursorName()
		if err != nil {
			return nil, err
		}
		return &SessionStmt{Kind: SessionClose, Name: name, Cursor: &CursorStmt{Name: name}}, nil
	case kw.Is("copy"):
		cp, err := parseCopy(nil, p.src, p.toks)
		if err != nil {
			return nil, err
		}
		p.i = len(p.toks)
		return &SessionStmt{Kind: SessionCopy, Copy: cp}, nil
	case kw.Is("prepare"):
		return p.prepare()
	case kw.Is("execute"):
		return p.execute()
	case kw.Is("deallocate"):
		p.accept("prepare")
		if p.atEnd() || p.toks[p.i].Kind != TokIdent {
			return nil, p.errAt("syntax error at or near %q: expected a prepared statement name or ALL", p.text(p.i))
		}
		t := p.toks[p.i]
		p.i++
		return &SessionStmt{Kind: SessionDeallocate, Name: t.Val}, nil
	}
	p.i = 0
	return nil, p.errAt("syntax error at or near %q: not a session statement", p.text(0))
}

// settingName reads a (dotted) setting name; with allowAll, ALL and
// TIME ZONE are accepted too.
// savepointName reads a savepoint's name: an identifier (lower-cased
// unless quoted), the last token of the statement.
func (p *sessParser) savepointName() (string, error) {
	if p.atEnd() || p.toks[p.i].Kind != TokIdent {
		return "", p.errAt("syntax error at or near %q: expected a savepoint name", p.text(p.i))
	}
	t := p.toks[p.i]
	p.i++
	return t.Val, nil
}

func (p *sessParser) settingName(allowAll bool) (string, error) {
	if allowAll && p.accept("time") {
		if err := p.expect("zone"); err != nil {
			return "", err
		}
		return "timezone", nil
	}
	if p.atEnd() || p.toks[p.i].Kind != TokIdent {
		return "", p.errAt("syntax error at or near %q: expected a setting name", p.text(p.i))
	}
	name := p.toks[p.i].Val
	if p.toks[p.i].Quoted {
		name = strings.ToLower(name)
	}
	if name == "all" && !allowAll && !p.toks[p.i].Quoted {
		return "", p.errAt("syntax error at or near \"all\"")
	}
	p.i++
	for p.i+1 < len(p.toks) && p.toks[p.i].IsPunct(".") && p.toks[p.i+1].Kind == TokIdent {
		name += "." + strings.ToLower(p.toks[p.i+1].Val)
		p.i += 2
	}
	return name, nil
}

func (p *sessParser) set() (*SessionStmt, error) {
	s := &SessionStmt{Kind: SessionSet}
	if p.accept("session") {
		if p.accept("characteristics") {
			if err := p.expect("as"); err != nil {
				return nil, err
			}
			if err := p.expect("transaction"); err != nil {
				return nil, err
			}
			modes, err := p.modes()
			if err != nil {
				return nil, err
			}
			if modes == "" {
				return nil, p.errAt("syntax error at end of input: expected a transaction mode")
			}
			return &SessionStmt{Kind: SessionCharacteristics, Name: "transaction", Value: modes}, nil
		}
	} else if p.accept("local") {
		s.Local = true
	}
	switch {
	case p.accept("transaction"):
		modes, err := p.modes()
		if err != nil {
			return nil, err
		}
		if modes == "" {
			return nil, p.errAt("syntax error at end of input: expected a transaction mode")
		}
		s.Name, s.Value, s.Local = "transaction", modes, true
		return s, nil
	case p.peek("time") && p.i+1 < len(p.toks) && p.toks[p.i+1].Is("zone"):
		p.i += 2
		s.Name = "timezone"
		if p.accept("local") || p.accept("default") {
			s.Default = true
			return s, nil
		}
		if p.peek("interval") {
			return nil, pgerr.New(pgerr.FeatureNotSupported, "SET TIME ZONE INTERVAL is not supported").
				WithPosition(CharPos(p.src, p.toks[p.i].Pos)).
				WithHint("write the offset as a string, e.g. SET TIME ZONE '+02:00', or a zone name such as 'Europe/Paris'")
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		s.Value = v
		return s, nil
	case p.accept("names"):
		s.Name = "client_encoding"
		if p.accept("default") {
			s.Default = true
			return s, nil
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		s.Value = v
		return s, nil
	case p.accept("schema"):
		s.Name = "search_path"
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		s.Value = v
		return s, nil
	}
	name, err := p.settingName(false)
	if err != nil {
		return nil, err
	}
	s.Name = name
	if !p.accept("to") {
		if p.atEnd() || !p.toks[p.i].IsOp("=") {
			return nil, p.errAt("syntax error at or near %q: expected TO or =", p.text(p.i))
		}
		p.i++
	}
	if p.accept("default") {
		s.Default = true
		return s, nil
	}
	var vals []string
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		if p.atEnd() || !p.toks[p.i].IsPunct(",") {
			break
		}
		p.i++
	}
	s.Value = strings.Join(vals, ", ")
	return s, nil
}

// value reads one SET value: a string, a (signed) number, or a word.
func (p *sessParser) value() (string, error) {
	if p.atEnd() {
		return "", p.errAt("syntax error at end of input: expected a value")
	}
	t := p.toks[p.i]
	switch t.Kind {
	case TokString:
		p.i++
		return t.Val, nil
	case TokNumber:
		p.i++
		return t.Val, nil
	case TokIdent:
		p.i++
		v := t.Val
		// Dotted words, e.g. SET search_path = public.x is not valid, but
		// SET dp.mechanism = laplace is a plain word.
		return v, nil
	case TokOp:
		if (t.Val == "-" || t.Val == "+") && p.i+1 < len(p.toks) && p.toks[p.i+1].Kind == TokNumber {
			p.i += 2
			if t.Val == "-" {
				return "-" + p.toks[p.i-1].Val, nil
			}
			return p.toks[p.i-1].Val, nil
		}
	}
	return "", p.errAt("syntax error at or near %q: expected a value", p.text(p.i))
}

// modes reads transaction modes (possibly none), normalized.
func (p *sessParser) modes() (string, error) {
	var out []string
	for !p.atEnd() {
		if len(out) > 0 && p.toks[p.i].IsPunct(",") {
			p.i++
		}
		switch {
		case p.accept("isolation"):
			if err := p.expect("level"); err != nil {
				return "", err
			}
			switch {
			case p.accept("serializable"):
				out = append(out, "isolation level serializable")
			case p.accept("repeatable"):
				if err := p.expect("read"); err != nil {
					return "", err
				}
				out = append(out, "isolation level repeatable read")
			case p.accept("read"):
				switch {
				case p.accept("committed"):
					out = append(out, "isolation level read committed")
				case p.accept("uncommitted"):
					out = append(out, "isolation level read uncommitted")
				default:
					return "", p.errAt("syntax error at or near %q: expected COMMITTED or UNCOMMITTED", p.text(p.i))
				}
			default:
				return "", p.errAt("syntax error at or near %q: expected an isolation level", p.text(p.i))
			}
		case p.accept("read"):
			switch {
			case p.accept("only"):
				out = append(out, "read only")
			case p.accept("write"):
				out = append(out, "read write")
			default:
				return "", p.errAt("syntax error at or near %q: expected ONLY or WRITE", p.text(p.i))
			}
		case p.accept("deferrable"):
			out = append(out, "deferrable")
		case p.accept("not"):
			if err := p.expect("deferrable"); err != nil {
				return "", err
			}
			out = append(out, "not deferrable")
		default:
			return "", p.errAt("syntax error at or near %q: expected a transaction mode", p.text(p.i))
		}
	}
	return strings.Join(out, ", "), nil
}

// prepare reads PREPARE name [ ( type [, …] ) ] AS query.
func (p *sessParser) prepare() (*SessionStmt, error) {
	if p.atEnd() || p.toks[p.i].Kind != TokIdent {
		return nil, p.errAt("syntax error at or near %q: expected a prepared statement name", p.text(p.i))
	}
	st := &SessionStmt{Kind: SessionPrepare, Name: p.toks[p.i].Val}
	p.i++
	if p.i < len(p.toks) && p.toks[p.i].IsPunct("(") {
		p.i++
		for {
			start := p.i
			for p.i < len(p.toks) && !p.toks[p.i].IsPunct(",") && !p.toks[p.i].IsPunct(")") {
				if p.toks[p.i].IsPunct("(") { // numeric(10,2)
					for p.i < len(p.toks) && !p.toks[p.i].IsPunct(")") {
						p.i++
					}
				}
				p.i++
			}
			if p.i >= len(p.toks) || p.i == start {
				return nil, p.errAt("syntax error at or near %q: expected a parameter type", p.text(p.i))
			}
			st.Args = append(st.Args, p.src[p.toks[start].Pos:p.toks[p.i-1].End])
			if p.toks[p.i].IsPunct(")") {
				p.i++
				break
			}
			p.i++
		}
	}
	if !p.accept("as") || p.atEnd() {
		return nil, p.errAt("syntax error at or near %q: expected AS and a query", p.text(p.i))
	}
	st.Value = p.src[p.toks[p.i].Pos:]
	p.i = len(p.toks)
	return st, nil
}

// execute reads EXECUTE name [ ( constant [, …] ) ]: only constants, so
// that the arguments bind as literals, as the extended protocol's do.
func (p *sessParser) execute() (*SessionStmt, error) {
	if p.atEnd() || p.toks[p.i].Kind != TokIdent {
		return nil, p.errAt("syntax error at or near %q: expected a prepared statement name", p.text(p.i))
	}
	st := &SessionStmt{Kind: SessionExecute, Name: p.toks[p.i].Val}
	p.i++
	if p.atEnd() {
		return st, nil
	}
	if !p.toks[p.i].IsPunct("(") {
		return nil, p.errAt("syntax error at or near %q", p.text(p.i))
	}
	p.i++
	for {
		start := p.i
		if !p.constant() {
			return nil, pgerr.New(pgerr.FeatureNotSupported, "EXECUTE arguments must be constants").
				WithPosition(CharPos(p.src, tokPos(p.src, p.toks, p.i))).
				WithHint("write numbers, 'strings', DATE '2024-01-01', NULL, TRUE or FALSE, e.g. EXECUTE q(100, 'oncology')")
		}
		st.Args = append(st.Args, p.src[p.toks[start].Pos:p.toks[p.i-1].End])
		if p.atEnd() {
			return nil, p.errAt("syntax error at end of input: expected )")
		}
		if p.toks[p.i].IsPunct(")") {
			p.i++
			return st, nil
		}
		if !p.toks[p.i].IsPunct(",") {
			return nil, p.errAt("syntax error at or near %q", p.text(p.i))
		}
		p.i++
	}
}

// constant reads one constant: [+|-] number, 'string' [::type],
// type 'string', NULL, TRUE or FALSE.
func (p *sessParser) constant() bool {
	if p.atEnd() {
		return false
	}
	t := p.toks[p.i]
	switch {
	case t.IsOp("-") || t.IsOp("+"):
		if p.i+1 < len(p.toks) && p.toks[p.i+1].Kind == TokNumber {
			p.i += 2
			return true
		}
		return false
	case t.Kind == TokNumber:
		p.i++
		return true
	case t.Kind == TokString:
		p.i++
		if p.i+1 < len(p.toks) && p.toks[p.i].IsPunct("::") && p.toks[p.i+1].Kind == TokIdent && !p.toks[p.i+1].Quoted {
			p.i += 2
		}
		return true
	case t.Is("null") || t.Is("true") || t.Is("false"):
		p.i++
		return true
	case t.Kind == TokIdent && !t.Quoted && p.i+1 < len(p.toks) && p.toks[p.i+1].Kind == TokString:
		switch t.Val {
		case "date", "timestamp", "timestamptz", "text", "numeric", "integer", "int", "bigint", "boolean":
			p.i += 2
			return true
		}
	}
	return false
}

func tokPos(src string, toks []Token, i int) int {
	if i < len(toks) {
		return toks[i].Pos
	}
	return len(src)
}
