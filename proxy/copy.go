package proxy

import (
	"context"
	"strconv"
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/pgsql"
	"github.com/jackc/pgx/v5/pgproto3"
)

// COPY ( query ) TO STDOUT over a released answer (issue 17: psql's
// \copy (SELECT … GROUP BY …) TO 'file' sends it). The query runs once,
// as a statement of the session would (a DP query is released and
// charged once), and its rows are sent in COPY's text or csv format,
// formatted as PostgreSQL's copyto.c formats them. Every other COPY is
// refused by pgsql.Classify before anything runs.

// execCopy runs the query of a COPY and formats its rows.
func (c *conn) execCopy(ctx context.Context, cp *pgsql.CopyStmt) (*resultSet, error) {
	if len(cp.ForceQuote) > 0 {
		// FORCE_QUOTE names columns: check them before the query runs
		// (and is charged).
		cols, err := c.queryColumns(ctx, cp.Query)
		if err != nil {
			return nil, err
		}
		// A set of the column names: the list's length is bounded by the
		// message only (500,000 names in 1 MiB), and checking each name
		// against each of 1,664 columns had cost a second of the proxy's
		// CPU per statement, outside the analyst's slot (attack round 88).
		names := make(map[string]bool, len(cols))
		for _, col := range cols {
			names[col.name] = true
		}
		for _, fq := range cp.ForceQuote {
			if !names[fq] {
				return nil, pgerr.New(invalidColumnReference, "FORCE_QUOTE column %q not referenced by COPY", fq).
					WithHint("name a column of the query's result")
			}
		}
	}
	// The rows, and their COPY lines, are held until the client has read
	// them: charged to the analyst until the next ReadyForQuery, as a
	// portal's result is (memory.go).
	if err := c.checkMemory(0); err != nil {
		return nil, err
	}
	rs, released, err := c.materialize(ctx, cp.Query, 1)
	if err != nil {
		return nil, err
	}
	if rs.cols == nil {
		return nil, pgerr.New(pgerr.FeatureNotSupported, "the query of COPY must return rows")
	}
	// The rows are held until sent; each line is built as it is sent
	// (sendCopyOut), at most one line at a time: a NULL cell takes the
	// NULL string (at most pgsql.MaxCopyNull bytes), which had multiplied
	// lines built all at once past every bound (attack round 72: 40 MB
	// of lines for a 0.3 MiB charge; review 74: through a post-processing
	// statement, whose outer result no room covers).
	if released {
		c.chargeMemoryOwn(rowsBytes(rs.rows)) // room was checked before the charge
	} else if err := c.checkMemory(rowsBytes(rs.rows)); err != nil {
		return nil, err
	}
	out := &resultSet{notices: rs.notices, copy: cp, copyColumns: len(rs.cols), rows: rs.rows,
		copyForce: make([]bool, len(rs.cols))}
	forced := make(map[string]bool, len(cp.ForceQuote))
	for _, fq := range cp.ForceQuote {
		forced[fq] = true
	}
	for i, col := range rs.cols {
		out.copyForce[i] = cp.ForceQuoteAll || forced[col.name]
	}
	if cp.Header {
		out.copyHeader = make([]*string, len(rs.cols))
		for i := range rs.cols {
			out.copyHeader[i] = &rs.cols[i].name
		}
	}
	out.tag = "COPY " + strconv.Itoa(len(rs.rows))
	return out, nil
}

// queryColumns returns the result columns of a query without running it
// (no data read, nothing charged).
func (c *conn) queryColumns(ctx context.Context, query string) ([]column, error) {
	route, err := c.classifyRoute(ctx, query)
	if err != nil {
		return nil, err
	}
	switch route {
	case pgsql.RouteDP:
		cols, err := c.describeDP(ctx, query)
		if err != nil {
			return nil, dpError(ctx, err, c.log)
		}
		return cols, nil
	case pgsql.RouteCatalog:
		sd, err := c.describeShadow(ctx, query, nil)
		if err != nil {
			return nil, err
		}
		cols := make([]column, len(sd.Fields))
		for i, f := range sd.Fields {
			cols[i] = column{name: f.Name, oid: f.DataTypeOID}
		}
		return cols, nil
	}
	return nil, pgerr.New(pgerr.FeatureNotSupported, "this statement cannot be used in COPY")
}

// copyLine formats one row (or the header) as a line of COPY output.
func copyLine(cp *pgsql.CopyStmt, row []*string, force []bool) []byte {
	var b strings.Builder
	for i, v := range row {
		if i > 0 {
			b.WriteString(cp.Delimiter)
		}
		switch {
		case v == nil:
			b.WriteString(cp.Null)
		case cp.CSV:
			copyCSV(&b, cp, *v, force[i], len(row) == 1)
		default:
			copyText(&b, cp.Delimiter[0], *v)
		}
	}
	b.WriteByte('\n')
	return []byte(b.String())
}

// copyText writes a value in COPY's text format (copyto.c
// CopyAttributeOutText): backslash, the delimiter and control characters
// are escaped with a backslash.
func copyText(b *strings.Builder, delim byte, v string) {
	for i := 0; i < len(v); i++ {
		ch := v[i]
		if ch < 0x20 {
			var esc byte
			switch ch {
			case '\b':
				esc = 'b'
			case '\f':
				esc = 'f'
			case '\n':
				esc = 'n'
			case '\r':
				esc = 'r'
			case '\t':
				esc = 't'
			case '\v':
				esc = 'v'
			default:
				if ch == delim {
					esc = ch
				}
			}
			if esc != 0 {
				b.WriteByte('\\')
				b.WriteByte(esc)
				continue
			}
			b.WriteByte(ch)
			continue
		}
		if ch == '\\' || ch == delim {
			b.WriteByte('\\')
		}
		b.WriteByte(ch)
	}
}

// copyCSV writes a value in COPY's csv format (copyto.c
// CopyAttributeOutCSV): quoted when forced, when it equals the NULL
// string (so that it reads back as a value), when it holds the delimiter,
// the quote, CR or LF, or when it is \. alone on a line; quotes and escape
// characters inside are preceded by the escape character.
func copyCSV(b *strings.Builder, cp *pgsql.CopyStmt, v string, force, singleColumn bool) {
	quote, escape, delim := cp.Quote[0], cp.Escape[0], cp.Delimiter[0]
	use := force || v == cp.Null
	if !use {
		if singleColumn && v == `\.` {
			use = true
		} else {
			for i := 0; i < len(v); i++ {
				if ch := v[i]; ch == delim || ch == quote || ch == '\n' || ch == '\r' {
					use = true
					break
				}
			}
		}
	}
	if !use {
		b.WriteString(v)
		return
	}
	b.WriteByte(quote)
	for i := 0; i < len(v); i++ {
		if ch := v[i]; ch == quote || ch == escape {
			b.WriteByte(escape)
		}
		b.WriteByte(v[i])
	}
	b.WriteByte(quote)
}

// sendCopyOut sends a COPY's output: CopyOutResponse (text format, as
// PostgreSQL reports both text and csv), one CopyData per line, CopyDone.
func (c *conn) sendCopyOut(rs *resultSet) {
	c.be.Send(&pgproto3.CopyOutResponse{OverallFormat: 0, ColumnFormatCodes: make([]uint16, rs.copyColumns)})
	if rs.copyHeader != nil {
		c.be.Send(&pgproto3.CopyData{Data: copyLine(rs.copy, rs.copyHeader, make([]bool, len(rs.copyHeader)))})
	}
	for i, row := range rs.rows {
		c.be.Send(&pgproto3.CopyData{Data: copyLine(rs.copy, row, rs.copyForce)})
		if (i+1)%shadowFlushRows == 0 {
			_ = c.be.Flush()
		}
	}
	c.be.Send(&pgproto3.CopyDone{})
}
