package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dpproxy/dpproxy/internal/citus"
	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// partitionedParts is the number of hash partitions by patient_id of the
// partitioned copy of the data (item 2, "partitioned").
const partitionedParts = 8

// scaleOutItem adds item 2's rows on the same data laid out by unit: the DP
// query through a second dpproxy whose upstream is a copy with visits and
// patients hash-partitioned by patient_id, and through a third whose
// upstream is a Citus coordinator with two workers (visits and patients
// distributed by patient_id, colocated), each against the analyst's SQL run
// directly on the same layout.
func (e *env) scaleOutItem(ctx context.Context, add func(row)) error {
	rows := fmt.Sprintf("%.1fM rows", float64(e.visits)/1e6)
	opts := demo.Options{Passwords: true, Patients: max(demo.NumPatients, (e.visits+19)/20), Visits: e.visits}

	step(fmt.Sprintf("partitioned copy of the data (%d hash partitions by patient_id)", partitionedParts))
	const partDB = "hospital_part"
	if err := demo.PartitionedCopy(ctx, e.data, partDB, partitionedParts, opts); err != nil {
		return fmt.Errorf("partitioned copy: %w", err)
	}
	if err := createTiny(ctx, e.data.DSN(partDB)); err != nil {
		return err
	}
	stop, dsn, err := e.startExtraProxy(ctx, "part", e.dataAddr, e.dataAddr+"/"+partDB)
	if err != nil {
		return err
	}
	m, k, err := e.analystLatency(ctx, dsn, e.data.DSN(partDB))
	stop()
	if err != nil {
		return fmt.Errorf("partitioned: %w", err)
	}
	add(row{fmt.Sprintf("2 DP latency, %s, partitioned by unit (%d)", rows, partitionedParts),
		fmt.Sprintf("median ms of %d runs each, alternated: dpproxy / the analyst's SQL on the same partitioned tables", k),
		fmt.Sprintf("%.1f", m.dp), fmt.Sprintf("%.1f", m.plain), fmt.Sprintf("%.2f×", m.dp/m.plain), "≤ 3×", verdict(m.dp <= 3*m.plain)})

	if err := citus.Check(""); err != nil {
		add(row{"2 DP latency, " + rows + ", Citus", "not measured: " + err.Error(), "-", "-", "-", "≤ 3×", "skipped"})
		return nil
	}
	step("Citus: a coordinator and two workers, the data distributed by patient_id")
	cl, err := citus.Start(ctx, citus.Options{Workers: 2, Dir: filepath.Join(e.work, "citus"), Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cl.Stop()
	if _, err := demo.Setup(ctx, cl.Coordinator, e.shadow, opts); err != nil {
		return fmt.Errorf("citus demo setup: %w", err)
	}
	if err := demo.Distribute(ctx, cl.Coordinator, cl.Workers, opts); err != nil {
		return err
	}
	if err := createTiny(ctx, cl.Coordinator.DSN(demo.Database)); err != nil {
		return err
	}
	coordAddr := net.JoinHostPort(cl.Coordinator.Host, strconv.Itoa(cl.Coordinator.Port))
	stop, dsn, err = e.startExtraProxy(ctx, "citus", e.dataAddr, coordAddr+"/"+demo.Database)
	if err != nil {
		return err
	}
	m, k, err = e.analystLatency(ctx, dsn, cl.Coordinator.DSN(demo.Database))
	stop()
	if err != nil {
		return fmt.Errorf("citus: %w", err)
	}
	add(row{fmt.Sprintf("2 DP latency, %s, Citus (coordinator + 2 workers, 32 shards)", rows),
		fmt.Sprintf("median ms of %d runs each, alternated: dpproxy / the analyst's SQL on the same distributed tables", k),
		fmt.Sprintf("%.1f", m.dp), fmt.Sprintf("%.1f", m.plain), fmt.Sprintf("%.2f×", m.dp/m.plain), "≤ 3×", verdict(m.dp <= 3*m.plain)})
	return nil
}

// startExtraProxy starts a dpproxy with the bench's config, its upstream
// moved from dataAddr/hospital to upstream (host:port/database), on a free
// address, and returns its stop function and analyst alice's DSN.
func (e *env) startExtraProxy(ctx context.Context, name, dataAddr, upstream string) (func(), string, error) {
	b, err := os.ReadFile(filepath.Join(e.work, "dpproxy.yaml"))
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	from := "@" + dataAddr + "/" + demo.Database + "?"
	cfg := string(b)
	if strings.Count(cfg, from) != 1 {
		return nil, "", fmt.Errorf("the bench config has %d upstream DSNs %q, want 1", strings.Count(cfg, from), from)
	}
	cfg = strings.Replace(cfg, from, "@"+upstream+"?", 1)
	cfg = strings.Replace(cfg, "listen: "+e.proxyAddr, "listen: "+addr, 1)
	path := filepath.Join(e.work, "dpproxy-"+name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, "", err
	}
	logf, err := os.Create(filepath.Join(e.work, "dpproxy-"+name+".log"))
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(e.o.dpproxy, "serve", "--config", path)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, "", err
	}
	stop := func() { stopProcess(cmd, syscall.SIGTERM, 10*time.Second, logf) }
	dsn := "postgres://alice:alice@" + addr + "/" + demo.Database + "?sslmode=disable"
	if err := waitConnect(ctx, dsn); err != nil {
		stop()
		b, _ := os.ReadFile(filepath.Join(e.work, "dpproxy-"+name+".log"))
		return nil, "", fmt.Errorf("dpproxy (%s) did not start: %w\n%s", name, err, tail(string(b), 2000))
	}
	return stop, dsn, nil
}

// analystLatency runs largeSQL through the proxy at proxyDSN (cache off)
// and directly at directDSN, alternately, as item 2's latency does (a
// warm-up round first, then until 2× the run duration has passed and at
// least 5 of each ran), and returns the medians in ms.
func (e *env) analystLatency(ctx context.Context, proxyDSN, directDSN string) (latencies, int, error) {
	var m latencies
	prx, err := pgx.Connect(ctx, proxyDSN)
	if err != nil {
		return m, 0, err
	}
	defer prx.Close(context.Background())
	if err := e.latencySettings(ctx, prx); err != nil {
		return m, 0, err
	}
	raw, err := pgx.Connect(ctx, directDSN)
	if err != nil {
		return m, 0, err
	}
	defer raw.Close(context.Background())
	once := func(c *pgx.Conn) (float64, error) {
		t0 := time.Now()
		rows, err := c.Query(ctx, largeSQL, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return 0, err
		}
		for rows.Next() {
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		return float64(time.Since(t0).Microseconds()) / 1000, nil
	}
	var dps, raws []float64
	deadline := time.Now().Add(2 * e.o.duration)
	for i := 0; i < 6 || time.Now().Before(deadline); i++ {
		a, err := once(prx)
		if err != nil {
			return m, 0, fmt.Errorf("through dpproxy: %w", err)
		}
		b, err := once(raw)
		if err != nil {
			return m, 0, fmt.Errorf("analyst's SQL direct: %w", err)
		}
		if i > 0 {
			dps, raws = append(dps, a), append(raws, b)
		}
	}
	return latencies{dp: median(dps), plain: median(raws)}, len(dps), nil
}
