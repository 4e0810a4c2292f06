package pgsql

import (
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
)

// COPY ( query ) TO STDOUT [WITH] [options]: a session statement whose
// query is classified on its own. See cursor.go for the statements of
// this kind.

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
	case len(cp.Null) > MaxCopyNull:
		// The proxy writes it once per NULL cell of every line (attack
		// round 72, review 74); PostgreSQL has no limit.
		return pgerr.New(pgerr.ProgramLimitExceeded, "COPY null representation longer than %d bytes", MaxCopyNull).WithPosition(CharPos(stmt, toks[0].Pos)).
			WithHint("use a short NULL string, e.g. NULL '' or the default \\N")
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

// MaxCopyNull bounds a COPY's NULL string.
const MaxCopyNull = 1024

// isCopyOption reports whether t starts another legacy COPY option.
func isCopyOption(t Token) bool {
	switch {
	case t.Is("csv"), t.Is("binary"), t.Is("header"), t.Is("delimiter"), t.Is("null"),
		t.Is("quote"), t.Is("escape"), t.Is("force"), t.Is("force_quote"), t.Is("encoding"), t.Is("format"):
		return true
	}
	return false
}
