package proxy

import (
	"fmt"
	"testing"
)

// TestSession_TransactionsLikePostgreSQL sends the same messages to a real
// PostgreSQL 15 and to the proxy and compares what each answers: the
// errors' SQLSTATEs, the ReadyForQuery statuses, every row the statements
// return (SHOW inside the string or batch) and SHOW afterwards. The
// sequences cover where a transaction begins and ends in each protocol
// (session.endXact): a Query string's implicit block, an extended batch up
// to Sync, a Query or COMMIT or ROLLBACK inside a batch, BEGIN joining
// the implicit transaction it starts in, SET LOCAL outside a block, and
// savepoints. dp.epsilon is a placeholder setting in PostgreSQL and
// follows the same rules there.
func TestSession_TransactionsLikePostgreSQL(t *testing.T) {
	ts, pgDSN := extSetup(t)
	const set, setY = "SET application_name = 'x'", "SET application_name = 'y'"
	cases := []struct {
		name string
		msgs msgSeq
	}{
		{"Query: SET, BEGIN, ROLLBACK", msgSeq{}.query(set + "; BEGIN; ROLLBACK")},
		{"Query: SET, syntax error", msgSeq{}.query(set + "; SELEC 1")},
		{"Query: SET, error", msgSeq{}.query(set + "; SELECT 1/0")},
		{"Query: SET, COMMIT, SET, syntax error", msgSeq{}.query(set + "; COMMIT; " + setY + "; SELEC 1")},
		{"Query: SET, COMMIT, SET, error", msgSeq{}.query(set + "; COMMIT; " + setY + "; SELECT 1/0")},
		{"Query: BEGIN, SET, error, ROLLBACK", msgSeq{}.query("BEGIN; " + set + "; SELECT 1/0").query("ROLLBACK")},
		{"Query: BEGIN, SET, SAVEPOINT, error, ROLLBACK TO", msgSeq{}.query("BEGIN; " + set + "; SAVEPOINT s; " + setY + "; SELECT 1/0").query("ROLLBACK TO s; SHOW application_name; COMMIT")},
		{"Query: SET, ROLLBACK", msgSeq{}.query(set + "; ROLLBACK")},
		{"Query: SET LOCAL, SHOW", msgSeq{}.query("SET LOCAL application_name = 'x'; SHOW application_name")},
		{"Query: SET LOCAL alone", msgSeq{}.query("SET LOCAL application_name = 'x'")},
		{"Query: SET TRANSACTION, SHOW", msgSeq{}.query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; SHOW transaction_isolation")},
		{"Query: SET TRANSACTION alone", msgSeq{}.query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")},
		{"batch: SET TRANSACTION, SHOW", msgSeq{}.pbe("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE").pbe("SHOW transaction_isolation").sync()},
		{"Query: savepoints", msgSeq{}.query("BEGIN; " + set + "; SAVEPOINT s; " + setY + "; ROLLBACK TO s; SHOW application_name; COMMIT")},
		{"Query: BEGIN, SET LOCAL, COMMIT", msgSeq{}.query("BEGIN; SET LOCAL application_name = 'x'; SHOW application_name; COMMIT")},
		{"batch: SET, Sync", msgSeq{}.pbe(set).sync()},
		{"batch: SET, error", msgSeq{}.pbe(set).fail().sync()},
		{"batch: SET, SET LOCAL, SHOW", msgSeq{}.pbe(set).pbe("SET LOCAL application_name = 'y'").pbe("SHOW application_name").sync()},
		{"batch: BEGIN, SET, Sync", msgSeq{}.pbe("BEGIN").pbe(set).sync()},
		{"batch: SET, Query, SET, error", msgSeq{}.pbe(set).query("SHOW application_name").pbe(setY).fail().sync()},
		{"batch: DISCARD ALL, SET", msgSeq{}.pbe("DISCARD ALL").pbe(set).sync()},
		{"batch: SET, COMMIT, DISCARD ALL", msgSeq{}.pbe(set).pbe("COMMIT").pbe("DISCARD ALL").sync()},
		{"batch: SET dp.epsilon, error", msgSeq{}.pbe("SET dp.epsilon = 0.01").fail().sync()},
		{"two batches: SET, Sync, error", msgSeq{}.pbe(set).sync().pbe(setY).fail().sync()},
	}
	for _, c := range cases {
		show := "application_name"
		if c.name == "batch: SET dp.epsilon, error" {
			show = "dp.epsilon"
		}
		pg, px := extCompare(t, ts, pgDSN, c.msgs, show)
		if show == "dp.epsilon" && pg.show == "" {
			pg.show = "0.1" // a placeholder's reset is the proxy's default
		}
		if got, want := describeSide(px), describeSide(pg); got != want {
			t.Errorf("%s:\nproxy      %s\nPostgreSQL %s", c.name, got, want)
		}
	}
}

// describeSide is what TestSession_TransactionsLikePostgreSQL compares:
// error codes, statuses, rows, tags and the setting afterwards.
func describeSide(s extSide) string {
	var codes []string
	for _, e := range s.rep.errs {
		codes = append(codes, e[:5])
	}
	var res []string
	for _, r := range s.rep.results {
		res = append(res, fmt.Sprintf("%s%v%v", r.tag, r.rows, r.notices))
	}
	return fmt.Sprintf("errors %v ready %q results %v after %q", codes, s.rep.ready, res, s.show)
}
