package proxy

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHeld48_CacheFollowsSettings (held): the same analyst's same query in
// two sessions whose settings would change the release (dp.contribution,
// dp.clipping, dp.bias, TimeZone for date keys, dp.delta with partition
// selection, dp.mechanism, dp.max_rows_per_unit) is released and charged
// afresh; only a setting that changes the presentation of the same answer
// (dp.error_columns) is answered from the cache, free, with the same rows.
func TestHeld48_CacheFollowsSettings(t *testing.T) {
	r := startRealDP(t, nil)
	a, na := r.connectNotices(t, "alice", "alice")
	b, nb := r.connectNotices(t, "alice", "alice")
	variants := []struct {
		q, setA, setB string
		cached        bool
	}{
		{q48, "SET dp.contribution = fixed", "SET dp.contribution = auto", false},
		{"SELECT SUM(cost) FROM visits", "SET dp.clipping = fixed", "SET dp.clipping = auto", false},
		{q48, "SET dp.bias = on", "SET dp.bias = off", false},
		{"SELECT date_trunc('month', visit_date) AS m, COUNT(*) FROM visits WHERE visit_date < '2020-04-01' GROUP BY 1", "SET TimeZone = 'UTC'", "SET TimeZone = 'America/New_York'", false},
		{"SELECT diagnosis, COUNT(*) FROM visits GROUP BY 1", "SET dp.delta = 1e-7", "SET dp.delta = 2e-7", false},
		{q48, "SET dp.mechanism = laplace", "SET dp.mechanism = gaussian; SET dp.delta = 1e-7", false},
		{q48, "SET dp.max_rows_per_unit = 2", "SET dp.max_rows_per_unit = 3", false},
		{q48, "SET dp.error_columns = off", "SET dp.error_columns = on", true},
	}
	eps := []string{"0.11", "0.12", "0.13", "0.14", "0.15", "0.16", "0.17", "0.18"}
	for i, v := range variants {
		ra, err := execAll(t, a, "RESET ALL; SET dp.epsilon = "+eps[i]+"; "+v.setA+"; "+v.q)
		if err != nil {
			t.Fatalf("%s: %v", v.setA, err)
		}
		n0 := len(r.charges(t))
		ca := checkAnswer(t, r, "alice", rows(ra[len(ra)-1]), na.take(), 0)
		rb, err := execAll(t, b, "RESET ALL; SET dp.epsilon = "+eps[i]+"; "+v.setB+"; "+v.q)
		if err != nil {
			t.Fatalf("%s: %v", v.setB, err)
		}
		notices := nb.take()
		cached := strings.Contains(strings.Join(notices, ""), "dp: cached answer")
		fresh := len(r.charges(t)) - n0
		switch {
		case cached != v.cached:
			t.Errorf("%s then %s: cached %v, want %v (%q)", v.setA, v.setB, cached, v.cached, notices)
		case cached && fresh != 0, !cached && fresh != 1:
			t.Errorf("%s then %s: %d new charges (cached %v)", v.setA, v.setB, fresh, cached)
		case cached:
			got := rows(rb[len(rb)-1])
			for j := range got {
				got[j] = got[j][:2] // without the error column
			}
			if cb := checkAnswer(t, r, "alice", got, notices, 0); cb == nil || ca == nil || cb.id != ca.id {
				t.Errorf("%s then %s: the cached answer is not the first session's charge", v.setA, v.setB)
			}
		default:
			checkAnswer(t, r, "alice", rows(rb[len(rb)-1]), notices, 0)
		}
	}
}

// TestHeld48_TwoAnalystsIndependent (held): bob's charges and answers do
// not depend on what alice does with the same statement: alice's answer is
// never bob's (bob is charged afresh), alice's cancelled statements and
// concurrent identical statements leave bob with exactly one charge of his
// ε per fresh answer, on his own ledger rows.
func TestHeld48_TwoAnalystsIndependent(t *testing.T) {
	r := startRealDP(t, func(c *Config) {
		for _, d := range c.Datasets {
			d.ResponseTime = 300 * time.Millisecond // a window to cancel in
		}
	})
	alice, na := r.connectNotices(t, "alice", "alice")
	bob, nb := r.connectNotices(t, "bob", "bob-secret")
	if _, err := execAll(t, alice, "SET dp.epsilon = 0.35"); err != nil {
		t.Fatal(err)
	}
	if _, err := execAll(t, bob, "SET dp.epsilon = 0.35"); err != nil {
		t.Fatal(err)
	}
	ra, err := execAll(t, alice, q48)
	if err != nil {
		t.Fatal(err)
	}
	ca := checkAnswer(t, r, "alice", rows(ra[0]), na.take(), 0.35)
	n0 := len(r.charges(t))
	rb, err := execAll(t, bob, q48)
	if err != nil {
		t.Fatal(err)
	}
	notices := nb.take()
	if strings.Contains(strings.Join(notices, ""), "cached") {
		t.Errorf("bob got a cached answer for alice's query: %q", notices)
	}
	cb := checkAnswer(t, r, "bob", rows(rb[0]), notices, 0.35)
	if ca != nil && cb != nil && ca.id == cb.id {
		t.Errorf("bob's answer is alice's charge %d", ca.id)
	}
	if got := since(r.charges(t), n0, ""); len(got) != 1 || got[0].analyst != "bob" {
		t.Errorf("charges after bob's query: %+v, want one of bob's", got)
	}

	// Concurrently: alice cancels the same statement (at another ε) while
	// bob runs it at his.
	if _, err := execAll(t, alice, "SET dp.epsilon = 0.25; SET dp.cache = off"); err != nil {
		t.Fatal(err)
	}
	if _, err := execAll(t, bob, "SET dp.epsilon = 0.25; SET dp.cache = off"); err != nil {
		t.Fatal(err)
	}
	n0 = len(r.charges(t))
	var wg sync.WaitGroup
	var bobRows [][]string
	var bobErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, _ = alice.Exec(ctx, q48).ReadAll() // cancelled (or closed) by the context
	}()
	go func() {
		defer wg.Done()
		res, err := bob.Exec(context.Background(), q48).ReadAll()
		bobErr = err
		if err == nil {
			bobRows = rows(res[0])
		}
	}()
	wg.Wait()
	if bobErr != nil {
		t.Fatalf("bob: %v", bobErr)
	}
	checkAnswer(t, r, "bob", bobRows, nb.take(), 0.25)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if len(since(r.charges(t), n0, "")) >= 2 || alice.IsClosed() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range since(r.charges(t), n0, "bob") {
		if c.costEps != 0.25 {
			t.Errorf("bob's charge %d records ε %v, want his 0.25", c.id, c.costEps)
		}
	}
	if n := len(since(r.charges(t), n0, "bob")); n != 1 {
		t.Errorf("bob has %d charges for one statement, want 1", n)
	}
}

// TestHeld48_PostProcessingOneCharge (held): a post-processing statement
// with two DP leaves (and the same leaf twice) is one charge of the sum of
// its distinct leaves' ε, each leaf's NOTICE states an ε of the charge's
// events, and the released leaves are the charge's recorded answers.
func TestHeld48_PostProcessingOneCharge(t *testing.T) {
	r := startRealDP(t, nil)
	pc, nc := r.connectNotices(t, "alice", "alice")
	const post = "WITH a AS (SELECT department, COUNT(*) AS n FROM visits GROUP BY 1), " +
		"b AS (SELECT department, SUM(length_of_stay) AS s FROM visits GROUP BY 1), " +
		"c AS (SELECT department, COUNT(*) AS n FROM visits GROUP BY 1) " +
		"SELECT a.department, a.n, b.s, c.n AS n2 FROM a JOIN b USING (department) JOIN c USING (department) ORDER BY 1"
	if _, err := execAll(t, pc, "SET dp.epsilon = 0.2; SET dp.cache = off"); err != nil {
		t.Fatal(err)
	}
	n0 := len(r.charges(t))
	res, err := execAll(t, pc, post)
	if err != nil {
		t.Fatal(err)
	}
	notices := nc.take()
	got := rows(res[0])
	fresh := since(r.charges(t), n0, "")
	if len(fresh) != 1 {
		t.Fatalf("%d charges for one post-processing statement, want 1", len(fresh))
	}
	c := fresh[0]
	if c.costEps < 0.4-1e-12 || c.costEps > 0.4+1e-12 {
		t.Errorf("the statement's charge records ε %v, want 0.4 (two distinct leaves at 0.2)", c.costEps)
	}
	leaves := storedRows(c.answer)
	if len(leaves) != 2 {
		t.Fatalf("the charge records %d answers, want 2", len(leaves))
	}
	for i, row := range got {
		if row[1] != row[3] {
			t.Errorf("row %d: the same leaf twice gave %s and %s: two draws under one charge", i, row[1], row[3])
		}
		if leaves[0][i][0] != row[0] || leaves[0][i][1] != row[1] || leaves[1][i][1] != row[2] {
			t.Errorf("row %v is not the charge's recorded leaves %v / %v", row, leaves[0][i], leaves[1][i])
		}
	}
	evs := eventEpsilons(c.events)
	for _, n := range notices {
		if !strings.HasPrefix(n, "dp: ") {
			continue
		}
		for _, e := range noticeEpsilons(n)[1:] {
			ok := false
			for _, ev := range evs {
				if ev > 0 && (e-ev)/ev < 0.0051 && (ev-e)/ev < 0.0051 {
					ok = true
				}
			}
			if !ok {
				t.Errorf("leaf NOTICE %q states ε %v, not an event of the charge (%v)", n, e, evs)
			}
		}
	}
}
