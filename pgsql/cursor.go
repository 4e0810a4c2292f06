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
