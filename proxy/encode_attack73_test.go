package proxy

import (
	"strconv"
	"testing"
)

// TestAttack73_Int8ExpressionOverflowsAfterCharge (attack round 73,
// severity medium: rule 3, a charge lost to a proxy-side failure after it,
// a session ended by a panic, and a column whose values do not fit its
// declared type).
//
// The planner types an expression over counts and integer literals as
// int8 (rewrite/build_select.go:123, intExpr in rewrite/expr.go:245) and
// release evaluates it in big.Rat on the noisy values (release/post.go
// outputRow), with no range check: COUNT(*) * 10000000000000000 is
// released as a 20-digit integer in a column described as int8 (PostgreSQL
// would raise 22003 "bigint out of range"; the proxy answers a value no
// int8 holds). Then:
//
//   - an extended-protocol Execute with binary result formats (what pgx,
//     pgjdbc and asyncpg ask for int8) is released and charged, and
//     encodeBinary's strconv.ParseInt fails in encodeResult
//     (proxy/extended.go:803): the analyst gets XX000 "internal error",
//     no hint, after the charge;
//   - DECLARE … BINARY CURSOR is charged and FETCH panics in
//     sendResultSet (proxy/query.go:426, "Text format cannot fail; keep
//     the invariant loud"): the session ends with FATAL XX000, its cursors
//     and transaction with it;
//   - in text, clients that scan the int8 column into an int64 fail.
//
// Whether the value overflows depends only on the statement's constants
// and the noisy count (post-processing), so this is no privacy leak; it
// is a charge paid for nothing and a session lost, repeatable at will.
//
// Asserted: a statement answered or refused cleanly, never charged and
// then failed; the session survives a FETCH; an int8 column's released
// text parses as an int64 or is NULL. (Fixed: a bigint expression beyond
// bigint is released as NULL, post-processing; an encoding failure is an
// error, never a panic.)
//
// Suggested fix: type an integer expression as numeric (or refuse it
// before the charge, 22003) when its interval, from the counts' public
// bound (max_rows) and the literals, may leave int8's range; and never
// panic in sendResultSet on an encoding failure (a clean error with
// SQLSTATE 22003 and the session kept).
func TestAttack73_Int8ExpressionOverflowsAfterCharge(t *testing.T) {
	r := startRealDP(t, nil)
	pc := r.connect(t)

	// Text: the column is described as int8; its value must be one.
	n0 := len(r.charges(t))
	res, err := execAll(t, pc, "SELECT COUNT(*) * 30000000000000000 AS x FROM visits")
	if err != nil {
		t.Logf("text: refused %s: %v (%d charges)", sqlstate(err), err, len(r.charges(t))-n0)
	} else if f := res[0].FieldDescriptions; len(f) == 1 && f[0].DataTypeOID == oidInt8 && len(res[0].Rows) == 1 {
		v := string(res[0].Rows[0][0])
		if res[0].Rows[0][0] == nil {
			t.Logf("text: released NULL (beyond bigint)")
		} else if _, perr := strconv.ParseInt(v, 10, 64); perr != nil {
			t.Errorf("text: a column described as int8 holds %q, which no int8 holds (PostgreSQL raises 22003): %v", v, perr)
		}
	}

	// Extended protocol, binary results.
	n0 = len(r.charges(t))
	br := pc.ExecParams(ctxT(t), "SELECT COUNT(*) * 10000000000000000 AS x FROM visits", nil, nil, nil, []int16{1}).Read()
	charged := len(r.charges(t)) - n0
	t.Logf("binary Execute: err %v (%s), %d rows, %d charges", br.Err, sqlstate(br.Err), len(br.Rows), charged)
	if br.Err != nil && charged > 0 {
		t.Errorf("binary Execute was charged (%d) and then failed with %s %q: the answer is lost after the charge", charged, sqlstate(br.Err), br.Err)
	}

	// Simple protocol, binary cursor.
	n0 = len(r.charges(t))
	_, derr := execAll(t, pc, "DECLARE c BINARY CURSOR WITH HOLD FOR SELECT COUNT(*) * 20000000000000000 AS x FROM visits")
	charged = len(r.charges(t)) - n0
	fres, ferr := execAll(t, pc, "FETCH ALL FROM c")
	_, aerr := execAll(t, pc, "SELECT 1")
	t.Logf("binary cursor: DECLARE err %v (%d charges); FETCH err %v (%d results); SELECT 1 after: %v", derr, charged, ferr, len(fres), aerr)
	if aerr != nil {
		t.Errorf("FETCH from a charged binary cursor ended the session (%v; then %v): a panic in sendResultSet", ferr, aerr)
	} else if ferr != nil && charged > 0 {
		t.Errorf("FETCH from a binary cursor charged %d failed: %v", charged, ferr)
	}
}
