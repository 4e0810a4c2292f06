package pgsql

import (
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// Cursors, COPY … TO STDOUT and the statements drivers send when a pooled
// connection is released (issue 17). They wrap a query or act on session
// state only, so they are session statements: the proxy answers them
// itself, and the query a DECLARE or COPY wraps is classified and
// answered like any other statement (the DP path, or the shadow catalog),
// once. No text of these statements reaches any database.

// FetchDirection is the direction of FETCH and MOVE.
type FetchDirection int

// Fetch directions, as PostgreSQL's FetchDirection (parsenodes.h): NEXT,
// PRIOR, FIRST, LAST, ABSOLUTE n, RELATIVE n, n, ALL, FORWARD [n|ALL],
// BACKWARD [n|ALL] all reduce to these with a count.
const (
	FetchForward  FetchDirection = iota // count rows forward (a negative count goes backward)
	FetchBackward                       // count rows backward
	FetchAbsolute                       // to row count (from the end when negative; 0: before the first)
	FetchRelative                       // count rows from the current one (0: the current row again)
)

// FetchAll is the count of FETCH ALL, FORWARD ALL and BACKWARD ALL.
const FetchAll int64 = 1<<63 - 1

// CursorStmt is a parsed DECLARE, FETCH, MOVE or CLOSE.
type CursorStmt struct {
	// Name is the cursor's name (lower-cased unless quoted); "" with All
	// for CLOSE ALL.
	Name string
	All  bool // CLOSE ALL

	// DECLARE name [BINARY] [ASENSITIVE|INSENSITIVE] [[NO] SCROLL] CURSOR
	// [{WITH|WITHOUT} HOLD] FOR query.
	Binary   bool
	Scroll   bool // SCROLL
	NoScroll bool // NO SCROLL
	Hold     bool // WITH HOLD
	// Query is the text of the query (a substring of the statement) and
	// QueryOffset its byte offset in the statement.
	Query       string
	QueryOffset int

	// FETCH and MOVE.
	Direction FetchDirection
	Count     int64
}

// CopyStmt is a parsed COPY ( query ) TO STDOUT [WITH] [options].
type CopyStmt struct {
	Query       string // the query inside the parentheses
	QueryOffset int    // its byte offset in the statement
	CSV         bool   // FORMAT csv (else text)
	Header      bool
	Delimiter   string // one character: tab (text) or comma (csv) unless given
	Null        string // \N (text) or "" (csv) unless given
	Quote       string // csv: " unless given
	Escape      string // csv: the quote unless given
	// ForceQuote lists the columns csv quotes even when not needed;
	// ForceQuoteAll quotes every non-NULL value.
	ForceQuote    []string
	ForceQuoteAll bool
}

// isUnlockAll reports whether toks are exactly
// SELECT [pg_catalog.]pg_advisory_unlock_all() [[AS] alias], the call
// asyncpg's pool makes when a connection is released.
func isUnlockAll(toks []Token) bool {
	_, ok := unlockAll(toks)
	return ok
}

// unlockAll is isUnlockAll, also returning the result column's name.
func unlockAll(toks []Token) (string, bool) {
	if len(toks) < 4 || !toks[0].Is("select") {
		return "", false
	}
	i := 1
	if i+1 < len(toks) && toks[i].Is("pg_catalog") && toks[i+1].IsPunct(".") {
		i += 2
	}
	if i+2 >= len(toks) || !toks[i].Is("pg_advisory_unlock_all") || !toks[i+1].IsPunct("(") || !toks[i+2].IsPunct(")") {
		return "", false
	}
	rest := toks[i+3:]
	switch {
	case len(rest) == 0:
		return "pg_advisory_unlock_all", true
	case len(rest) == 1 && rest[0].Kind == TokIdent && !rest[0].Is("from") && !rest[0].Is("where"):
		return rest[0].Val, true
	case len(rest) == 2 && rest[0].Is("as") && rest[1].Kind == TokIdent:
		return rest[1].Val, true
	}
	return "", false
}

// classifyWrapper classifies DECLARE and COPY: RouteSession when the
// statement is a form the proxy answers and the query it wraps is one the
// proxy may answer (a DP query or a catalog statement), else RouteRefuse
// with the error (the wrapped query's own refusal, with its position in
// the whole statement). handled is false for other statements.
func classifyWrapper(ds *policy.Dataset, stmt string, toks []Token) (route Route, handled bool, err error) {
	var query string
	var offset int
	switch {
	case toks[0].Is("declare"):
		cs, err := parseDeclare(stmt, toks)
		if err != nil {
			return RouteRefuse, true, err
		}
		query, offset = cs.Query, cs.QueryOffset
	case toks[0].Is("copy"):
		cp, err := parseCopy(ds, stmt, toks)
		if err != nil {
			return RouteRefuse, true, err
		}
		query, offset = cp.Query, cp.QueryOffset
	default:
		return 0, false, nil
	}
	// A DECLARE or COPY inside another is not a query (and refusing it
	// here keeps classification linear in the statement's length).
	for _, t := range toks {
		if t.Pos == offset {
			if t.Is("declare") || t.Is("copy") {
				return RouteRefuse, true, SyntaxErr(stmt, offset, "syntax error at or near %q", t.Val).
					WithHint("%s wraps a query: SELECT, VALUES or TABLE", strings.ToUpper(toks[0].Val))
			}
			break
		}
	}
	inner, err := Classify(ds, query)
	if err != nil {
		return RouteRefuse, true, shiftErr(err, stmt, offset)
	}
	switch inner {
	case RouteDP, RouteCatalog:
		return RouteSession, true, nil
	case RouteEmpty:
		return RouteRefuse, true, SyntaxErr(stmt, len(stmt), "syntax error at end of input")
	}
	it, _ := Lex(query)
	word := ""
	if len(it) > 0 {
		word = it[0].Val
	}
	return RouteRefuse, true, SyntaxErr(stmt, offset, "syntax error at or near %q", word).
		WithHint("%s wraps a query: SELECT, VALUES or TABLE", strings.ToUpper(toks[0].Val))
}

// shiftErr makes the position of an error about the wrapped query
// relative to the whole statement.
func shiftErr(err error, stmt string, offset int) error {
	pe, ok := pgerr.As(err)
	if !ok || pe.Position <= 0 || offset <= 0 || offset > len(stmt) {
		return err
	}
	cp := *pe
	cp.Position = pe.Position + CharPos(stmt, offset) - 1
	return &cp
}

// parseDeclare parses
//
//	DECLARE name [BINARY] [ASENSITIVE|INSENSITIVE] [NO SCROLL|SCROLL] CURSOR [{WITH|WITHOUT} HOLD] FOR query
func parseDeclare(stmt string, toks []Token) (*CursorStmt, error) {
	p := &sessParser{src: stmt, toks: toks, i: 1}
	cs := &CursorStmt{}
	name, err := p.cursorName()
	if err != nil {
		return nil, err
	}
	cs.Name = name
	for {
		switch {
		case p.accept("binary"):
			cs.Binary = true
			continue
		case p.accept("asensitive"), p.accept("insensitive"):
			continue
		case p.accept("scroll"):
			cs.Scroll = true
			continue
		case p.peek("no") && p.i+1 < len(toks) && toks[p.i+1].Is("scroll"):
			p.i += 2
			cs.NoScroll = true
			continue
		}
		break
	}
	if cs.Scroll && cs.NoScroll {
		return nil, pgerr.New("42P11", "cannot specify both SCROLL and NO SCROLL").WithPosition(CharPos(stmt, toks[0].Pos)).
			WithHint("write one of them")
	}
	if err := p.expect("cursor"); err != nil {
		return nil, err
	}
	switch {
	case p.accept("with"):
		if err := p.expect("hold"); err != nil {
			return nil, err
		}
		cs.Hold = true
	case p.accept("without"):
		if err := p.expect("hold"); err != nil {
			return nil, err
		}
	}
	if err := p.expect("for"); err != nil {
		return nil, err
	}
	if p.atEnd() {
		return nil, p.errAt("syntax error at end of input")
	}
	cs.QueryOffset = toks[p.i].Pos
	cs.Query = stmt[cs.QueryOffset:]
	return cs, nil
}

// cursorName reads a cursor name: an identifier, lower-cased unless quoted.
func (p *sessParser) cursorName() (string, error) {
	if p.atEnd() || p.toks[p.i].Kind != TokIdent {
		return "", p.errAt("syntax error at or near %q: expected a cursor name", p.text(p.i))
	}
	t := p.toks[p.i]
	p.i++
	return t.Val, nil
}

// parseFetch parses FETCH and MOVE (move: the statement is MOVE):
//
//	{FETCH|MOVE} [direction] [FROM|IN] name
//
// with direction one of NEXT, PRIOR, FIRST, LAST, ABSOLUTE n, RELATIVE n,
// n, ALL, FORWARD [n|ALL], BACKWARD [n|ALL] (n a signed integer).
func (p *sessParser) parseFetch() (*CursorStmt, error) {
	cs := &CursorStmt{Direction: FetchForward, Count: 1}
	count := func() (int64, bool, error) { // a signed integer, if one comes next
		neg := false
		j := p.i
		if j < len(p.toks) && (p.toks[j].IsOp("-") || p.toks[j].IsOp("+")) {
			neg = p.toks[j].IsOp("-")
			j++
		}
		if j >= len(p.toks) || p.toks[j].Kind != TokNumber {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(p.toks[j].Val, 10, 64)
		if err != nil {
			p.i = j
			return 0, false, p.errAt("syntax error at or near %q: expected an integer row count", p.text(j))
		}
		p.i = j + 1
		if neg {
			n = -n
		}
		return n, true, nil
	}
	needCount := func() (int64, error) {
		n, ok, err := count()
		if err == nil && !ok {
			err = p.errAt("syntax error at or near %q: expected a row count", p.text(p.i))
		}
		return n, err
	}
	var err error
	switch {
	case p.accept("next"):
	case p.accept("prior"):
		cs.Direction = FetchBackward
	case p.accept("first"):
		cs.Direction, cs.Count = FetchAbsolute, 1
	case p.accept("last"):
		cs.Direction, cs.Count = FetchAbsolute, -1
	case p.accept("absolute"):
		cs.Direction = FetchAbsolute
		cs.Count, err = needCount()
	case p.accept("relative"):
		cs.Direction = FetchRelative
		cs.Count, err = needCount()
	case p.accept("all"):
		cs.Count = FetchAll
	case p.accept("forward"), p.accept("backward"):
		if p.toks[p.i-1].Is("backward") {
			cs.Direction = FetchBackward
		}
		if p.accept("all") {
			cs.Count = FetchAll
		} else if n, ok, cerr := count(); cerr != nil {
			err = cerr
		} else if ok {
			cs.Count = n
		}
	default:
		if n, ok, cerr := count(); cerr != nil {
			err = cerr
		} else if ok {
			cs.Count = n
		}
	}
	if err != nil {
		return nil, err
	}
	if !p.accept("from") {
		p.accept("in")
	}
	if cs.Name, err = p.cursorName(); err != nil {
		return nil, err
	}
	return cs, nil
}

// parseCopy parses the one COPY form the proxy answers,
//
//	COPY ( query ) TO STDOUT [[WITH] ( option [, …] ) | [WITH] legacy options]
//
// and refuses every other COPY before anything is run: COPY FROM writes,
// COPY … TO a file or PROGRAM runs on the server, and COPY of a table
// (not a query) would copy its rows.
func parseCopy(ds *policy.Dataset, stmt string, toks []Token) (*CopyStmt, error) {
	at := func(i int) Token {
		if i < len(toks) {
			return toks[i]
		}
		return Token{}
	}
	hint := "copy a DP answer with COPY (SELECT department, COUNT(*) FROM visits GROUP BY department) TO STDOUT (psql: \\copy (…) TO 'file')"
	if !at(1).IsPunct("(") {
		// COPY table [(cols)] {FROM|TO} …
		j := 1
		for j < len(toks) && !toks[j].Is("from") && !toks[j].Is("to") {
			j++
		}
		if at(j).Is("from") {
			return nil, pgerr.New(pgerr.InsufficientPrivilege, "COPY FROM writes to a table and is not allowed through dpproxy").
				WithPosition(CharPos(stmt, toks[0].Pos)).WithHint("dpproxy is read-only; %s", hint)
		}
		if NamesProtected(ds, toks[1:j]) {
			return nil, pgerr.New(pgerr.InsufficientPrivilege, "COPY of a protected table returns its rows and is not allowed through dpproxy").
				WithPosition(CharPos(stmt, toks[0].Pos)).WithHint("%s", hint)
		}
		return nil, pgerr.New(pgerr.FeatureNotSupported, "COPY of a table is not supported by dpproxy; only COPY (query) TO STDOUT").
			WithPosition(CharPos(stmt, toks[0].Pos)).WithHint("write COPY (SELECT … FROM table) TO STDOUT")
	}
	// The matching parenthesis.
	depth, end := 0, -1
	for j := 1; j < len(toks) && end < 0; j++ {
		switch {
		case toks[j].IsPunct("("):
			depth++
		case toks[j].IsPunct(")"):
			depth--
			if depth == 0 {
				end = j
			}
		}
	}
	if end < 0 || end == 2 {
		return nil, SyntaxErr(stmt, len(stmt), "syntax error at end of input")
	}
	cp := &CopyStmt{QueryOffset: toks[2].Pos, Query: stmt[toks[2].Pos:toks[end].Pos]}
	j := end + 1
	switch {
	case at(j).Is("from"):
		return nil, SyntaxErr(stmt, toks[j].Pos, "syntax error at or near \"FROM\"").
			WithHint("a query can only be copied TO STDOUT")
	case !at(j).Is("to"):
		return nil, SyntaxErr(stmt, posOr(stmt, toks, j), "syntax error at or near %q: expected TO STDOUT", tokText(stmt, toks, j))
	}
	j++
	if !at(j).Is("stdout") {
		what := "a file"
		if at(j).Is("program") {
			what = "a program"
		}
		return nil, pgerr.New(pgerr.InsufficientPrivilege, "COPY to %s runs on the database server and is not allowed through dpproxy", what).
			WithPosition(CharPos(stmt, posOr(stmt, toks, j))).
			WithHint("use COPY (…) TO STDOUT; psql's \\copy (…) TO 'file' writes the file on your machine")
	}
	j++
	if err := parseCopyOptions(stmt, toks, j, cp); err != nil {
		return nil, err
	}
	return cp, nil
}

func posOr(stmt string, toks []Token, j int) int {
	if j < len(toks) {
		return toks[j].Pos
	}
	return len(stmt)
}

func tokText(stmt string, toks []Token, j int) string {
	if j < len(toks) {
		return stmt[toks[j].Pos:toks[j].End]
	}
	return "end of input"
}

// parseCopyOptions reads COPY's options from toks[j:]: the list form
// WITH (FORMAT csv, HEADER, …) and the older keyword form (WITH CSV
// HEADER DELIMITER ',' …) that psql's \copy passes on.
func parseCopyOptions(stmt string, toks []Token, j int, cp *CopyStmt) error {
	setDefaults := func() {
		if cp.Delimiter == "" {
			cp.Delimiter = "\t"
			if cp.CSV {
				cp.Delimiter = ","
			}
		}
		if cp.CSV {
			if cp.Quote == "" {
				cp.Quote = `"`
			}
			if cp.Escape == "" {
				cp.Escape = cp.Quote
			}
		}
	}
	nullSet := false
	bad := func(k int, format string, args ...any) error {
		return SyntaxErr(stmt, posOr(stmt, toks, k), format, args...)
	}
	strArg := func(k int, what string) (string, error) {
		if k >= len(toks) || toks[k].Kind != TokString {
			return "", bad(k, "syntax error at or near %q: %s needs a quoted string", tokText(stmt, toks, k), what)
		}
		return toks[k].Val, nil
	}
	apply := func(k int, name string) (int, error) {
		// k is the index after the option's name; returns the next index.
		switch name {
		case "format":
			if k >= len(toks) || toks[k].Kind != TokIdent && toks[k].Kind != TokString {
				return k, bad(k, "syntax error: FORMAT needs text, csv or binary")
			}
			switch strings.ToLower(toks[k].Val) {
			case "csv":
				cp.CSV = true
			case "text":
			case "binary":
				return k, pgerr.New(pgerr.FeatureNotSupported, "COPY in binary format is not supported by dpproxy").
					WithPosition(CharPos(stmt, toks[k].Pos)).WithHint("use FORMAT csv or FORMAT text")
			default:
				return k, pgerr.New(pgerr.InvalidParameterValue, "COPY format %q not recognized", toks[k].Val).
					WithPosition(CharPos(stmt, toks[k].Pos)).WithHint("use FORMAT csv or FORMAT text")
			}
			return k + 1, nil
		case "csv":
			cp.CSV = true
			return k, nil
		case "binary":
			return k, pgerr.New(pgerr.FeatureNotSupported, "COPY in binary format is not supported by dpproxy").
				WithPosition(CharPos(stmt, toks[k-1].Pos)).WithHint("use FORMAT csv or FORMAT text")
		case "header":
			cp.Header = true
			if k < len(toks) && (toks[k].Kind == TokIdent || toks[k].Kind == TokNumber || toks[k].Kind == TokString) && !isCopyOption(toks[k]) {
				switch strings.ToLower(toks[k].Val) {
				case "true", "on", "1":
				case "false", "off", "0":
					cp.Header = false
				default:
					return k, pgerr.New(pgerr.InvalidParameterValue, "header requires a Boolean value").
						WithPosition(CharPos(stmt, toks[k].Pos)).WithHint("write HEADER, HEADER true or HEADER false")
				}
				return k + 1, nil
			}
			return k, nil
		case "delimiter", "null", "quote", "escape":
			if k < len(toks) && toks[k].Is("as") {
				k++
			}
			v, err := strArg(k, strings.ToUpper(name))
			if err != nil {
				return k, err
			}
			switch name {
			case "delimiter":
				cp.Delimiter = v
			case "null":
				cp.Null, nullSet = v, true
			case "quote":
				cp.Quote = v
			case "escape":
				cp.Escape = v
			}
			return k + 1, nil
		case "force_quote", "force":
			if name == "force" {
				if k >= len(toks) || !toks[k].Is("quote") {
					return k, bad(k, "syntax error at or near %q: expected QUOTE", tokText(stmt, toks, k))
				}
				k++
			}
			if k < len(toks) && toks[k].IsOp("*") {
				cp.ForceQuoteAll = true
				return k + 1, nil
			}
			paren := k < len(toks) && toks[k].IsPunct("(")
			if paren {
				k++
			}
			for k < len(toks) && toks[k].Kind == TokIdent {
				cp.ForceQuote = append(cp.ForceQuote, toks[k].Val)
				k++
				if k < len(toks) && toks[k].IsPunct(",") && (paren || k+1 < len(toks) && toks[k+1].Kind == TokIdent && !isCopyOption(toks[k+1])) {
					k++
					continue
				}
				break
			}
			if paren {
				if k >= len(toks) || !toks[k].IsPunct(")") {
					return k, bad(k, "syntax error at or near %q: expected )", tokText(stmt, toks, k))
				}
				k++
			}
			if len(cp.ForceQuote) == 0 {
				return k, bad(k, "syntax error: FORCE_QUOTE needs column names or *")
			}
			return k, nil
		case "encoding":
			v, err := strArg(k, "ENCODING")
			if err != nil {
				return k, err
			}
			if n := strings.ToUpper(strings.ReplaceAll(strings.ReplaceAll(v, "-", ""), "_", "")); n != "UTF8" && n != "UNICODE" {
				return k, pgerr.New(pgerr.FeatureNotSupported, "COPY encoding %q is not supported by dpproxy", v).
					WithPosition(CharPos(stmt, toks[k].Pos)).WithHint("the proxy copies in UTF8; leave ENCODING out")
			}
			return k + 1, nil
		}
		return k, pgerr.New(pgerr.SyntaxError, "option %q not recognized", name).
			WithPosition(CharPos(stmt, toks[k-1].Pos)).
			WithHint("dpproxy's COPY takes FORMAT, HEADER, DELIMITER, NULL, QUOTE, ESCAPE, FORCE_QUOTE and ENCODING")
	}
	if j < len(toks) && toks[j].Is("with") {
		j++
	}
	if j < len(toks) && toks[j].IsPunct("(") {
		j++
		for {
			if j >= len(toks) || toks[j].Kind != TokIdent {
				return bad(j, "syntax error at or near %q: expected a COPY option", tokText(stmt, toks, j))
			}
			next, err := apply(j+1, strings.ToLower(toks[j].Val))
			if err != nil {
				return err
			}
			j = next
			if j < len(toks) && toks[j].IsPunct(",") {
				j++
				continue
			}
			if j >= len(toks) || !toks[j].IsPunct(")") {
				return bad(j, "syntax error at or near %q: expected , or )", tokText(stmt, toks, j))
			}
			j++
			break
		}
	} else {
		for j < len(toks) {
			if toks[j].Kind != TokIdent || toks[j].Quoted {
				return bad(j, "syntax error at or near %q: expected a COPY option", tokText(stmt, toks, j))
			}
			next, err := apply(j+1, toks[j].Val)
			if err != nil {
				return err
			}
			j = next
		}
	}
	if j < len(toks) {
		return bad(j, "syntax error at or near %q", tokText(stmt, toks, j))
	}
	setDefaults()
	if !nullSet {
		cp.Null = `\N`
		if cp.CSV {
			cp.Null = ""
		}
	}
	// PostgreSQL's checks (copy.c ProcessCopyOptions), the ones that
	// matter for output.
	invalid := func(format string, args ...any) error {
		return pgerr.New(pgerr.InvalidParameterValue, format, args...).WithPosition(CharPos(stmt, toks[0].Pos)).
			WithHint("see PostgreSQL's COPY options; e.g. COPY (…) TO STDOUT WITH (FORMAT csv, HEADER)")
	}
	switch {
	case len(cp.Delimiter) != 1:
		return invalid("COPY delimiter must be a single one-byte character")
	case cp.Delimiter == "\r" || cp.Delimiter == "\n":
		return invalid("COPY delimiter cannot be newline or carriage return")
	case strings.ContainsAny(cp.Null, "\r\n"):
		return invalid("COPY null representation cannot use newline or carriage return")
	case !cp.CSV && strings.Contains(`\.abcdefghijklmnopqrstuvwxyz0123456789`, cp.Delimiter):
		return invalid("COPY delimiter cannot be %q", cp.Delimiter)
	case !cp.CSV && (cp.Quote != "" || cp.Escape != ""):
		return pgerr.New(pgerr.FeatureNotSupported, "COPY quote and escape are available only in CSV mode").WithPosition(CharPos(stmt, toks[0].Pos)).
			WithHint("add FORMAT csv")
	case !cp.CSV && (cp.ForceQuoteAll || cp.ForceQuote != nil):
		return pgerr.New(pgerr.FeatureNotSupported, "COPY force quote available only in CSV mode").WithPosition(CharPos(stmt, toks[0].Pos)).
			WithHint("add FORMAT csv")
	case cp.CSV && len(cp.Quote) != 1:
		return invalid("COPY quote must be a single one-byte character")
	case cp.CSV && len(cp.Escape) != 1:
		return invalid("COPY escape must be a single one-byte character")
	case cp.CSV && cp.Delimiter == cp.Quote:
		return invalid("COPY delimiter and quote must be different")
	case strings.Contains(cp.Null, cp.Delimiter):
		return invalid("COPY delimiter must not appear in the NULL specification")
	}
	return nil
}

// isCopyOption reports whether t starts another legacy COPY option.
func isCopyOption(t Token) bool {
	switch {
	case t.Is("csv"), t.Is("binary"), t.Is("header"), t.Is("delimiter"), t.Is("null"),
		t.Is("quote"), t.Is("escape"), t.Is("force"), t.Is("force_quote"), t.Is("encoding"), t.Is("format"):
		return true
	}
	return false
}
