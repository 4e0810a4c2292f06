package main

import (
	"strings"
	"testing"
)

// A pgbench 15 summary, as printed after a run.
const pgbenchOut = `pgbench (15.18 (Debian 15.18-0+deb12u1), server 15.0 (dpproxy))
transaction type: /tmp/dpbench-1/dpproxy-simple.sql
scaling factor: 1
query mode: simple
number of clients: 8
number of threads: 2
maximum number of tries: 1
duration: 10 s
number of transactions actually processed: 91102
number of failed transactions: 0 (0.000%)
latency average = 0.877 ms
initial connection time = 14.218 ms
tps = 9118.402134 (without initial connection time)
`

func TestParsePgbench(t *testing.T) {
	r, ok := parsePgbench(pgbenchOut)
	if !ok || r.tps != 9118.402134 || r.latencyMS != 0.877 || r.txns != 91102 {
		t.Fatalf("parsePgbench = %+v, %v; want tps 9118.402134, latency 0.877 ms, 91102 txns, ok", r, ok)
	}
	failed := strings.Replace(pgbenchOut, "failed transactions: 0 (0.000%)", "failed transactions: 3 (0.003%)", 1)
	if _, ok := parsePgbench(failed); ok {
		t.Error("a run with failed transactions parsed as ok")
	}
	none := strings.Replace(pgbenchOut, "processed: 91102", "processed: 0", 1)
	if _, ok := parsePgbench(none); ok {
		t.Error("a run of 0 transactions parsed as ok")
	}
}

func TestNoticeFilter(t *testing.T) {
	var b strings.Builder
	f := &noticeFilter{w: &b}
	// Lines split across writes; NOTICE lines dropped, others kept.
	for _, chunk := range []string{"NOTICE:  dp: epsilon 0.001 sp", "ent\npgbench: error: cli", "ent 0 aborted\nNOTICE:  x\n"} {
		f.Write([]byte(chunk))
	}
	if got, want := b.String(), "pgbench: error: client 0 aborted\n"; got != want {
		t.Errorf("filtered = %q, want %q", got, want)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestMedianRatio(t *testing.T) {
	a := []result{{tps: 10}, {tps: 30}, {tps: 20}}
	b := []result{{tps: 10}, {tps: 10}, {tps: 40}}
	// Per-round ratios 1, 3, 0.5: the median is 1 (not 20/10 of the median TPS).
	if got := medianRatio(a, b); got != 1 {
		t.Errorf("medianRatio = %v, want 1", got)
	}
	if got := medianTPS(a); got != 20 {
		t.Errorf("medianTPS = %v, want 20", got)
	}
	if got := medianRatio(a, nil); got != 0 {
		t.Errorf("medianRatio without a baseline = %v, want 0", got)
	}
}
