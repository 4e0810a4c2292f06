package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/examples"
	"github.com/dpproxy/dpproxy/internal/citus"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/internal/pgcluster"
	"go.uber.org/zap"
)

// The PostgreSQL addresses written in examples/dpproxy.yaml: the data
// cluster (upstream and ledger DSNs) and the shadow cluster (shadow DSNs).
// The demo replaces them with its clusters' addresses.
const (
	examplePGAddr     = "127.0.0.1:5432"
	exampleShadowAddr = "127.0.0.1:5433"
)

var listenLine = regexp.MustCompile(`(?m)^listen: .*$`)

// demoConfig turns examples/dpproxy.yaml into the demo's config: the data
// cluster's address in the upstream and ledger DSNs, the shadow cluster's in
// the shadow DSNs, and the --listen address.
func demoConfig(tmpl []byte, pgAddr, shadowAddr, listen string) ([]byte, error) {
	s := string(tmpl)
	if !strings.Contains(s, "@"+examplePGAddr+"/") || !strings.Contains(s, "@"+exampleShadowAddr+"/") || !listenLine.MatchString(s) {
		return nil, fmt.Errorf("examples/dpproxy.yaml no longer has the %s (data) and %s (shadow) DSNs and the listen: line the demo replaces", examplePGAddr, exampleShadowAddr)
	}
	// One pass, so that neither replacement is replaced again.
	s = strings.NewReplacer("@"+examplePGAddr+"/", "@"+pgAddr+"/", "@"+exampleShadowAddr+"/", "@"+shadowAddr+"/").Replace(s)
	s = listenLine.ReplaceAllLiteralString(s, "listen: "+listen)
	return []byte(s), nil
}

// startClusters starts the data cluster in dataDir and the shadow cluster in
// dataDir/shadow (both temporary when dataDir is empty), concurrently. The
// shadow catalog must not share the data's cluster: see internal/demo.
// The demo's shadow server is bounded as SECURITY.md (G8) asks of any:
// analysts' catalog statements run there, so each backend's disk for
// temporary files and its memory (53200 "out of memory" in that backend
// alone, never the kernel's OOM killer ending the server's sessions) are
// bounded.
var (
	shadowServerSettings = map[string]string{"temp_file_limit": "1GB"}
	shadowProcessMemory  = int64(1 << 30)
)

// dataSettings are extra server settings of the data cluster (the Citus
// coordinator's CitusSettings with --citus-workers).
func startClusters(ctx context.Context, dataDir string, dataSettings map[string]string, log *zap.Logger) (data, shadow *pgcluster.Cluster, err error) {
	shadowDir := ""
	if dataDir != "" {
		shadowDir = filepath.Join(dataDir, "shadow")
	}
	type result struct {
		c   *pgcluster.Cluster
		err error
	}
	ch := make(chan result, 1)
	startShadow := func() {
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: shadowDir, Logger: log.Named("shadow"),
			Settings: shadowServerSettings, MaxProcessMemory: shadowProcessMemory})
		ch <- result{c, err}
	}
	// As root, pgcluster runs the servers as the "postgres" system user and
	// creates it if needed: two concurrent starts would both run useradd.
	concurrent := os.Geteuid() != 0
	if !concurrent {
		_, err := user.Lookup("postgres")
		concurrent = err == nil
	}
	if concurrent {
		go startShadow()
	}
	data, derr := pgcluster.Start(ctx, pgcluster.Options{Dir: dataDir, Logger: log.Named("data"), Settings: dataSettings})
	if !concurrent {
		if derr == nil {
			startShadow()
		} else {
			ch <- result{}
		}
	}
	sr := <-ch
	if derr != nil || sr.err != nil {
		for _, c := range []*pgcluster.Cluster{data, sr.c} {
			if c != nil {
				if err := c.Stop(); err != nil {
					log.Error("stop PostgreSQL", zap.Error(err))
				}
			}
		}
		if derr != nil {
			return nil, nil, fmt.Errorf("start the data cluster: %w", derr)
		}
		return nil, nil, fmt.Errorf("start the shadow cluster: %w", sr.err)
	}
	return data, sr.c, nil
}

func stopClusters(cs []*pgcluster.Cluster, log *zap.Logger) {
	for _, c := range cs {
		if err := c.Stop(); err != nil {
			log.Error("stop PostgreSQL", zap.String("dir", c.Dir), zap.Error(err))
		}
	}
}

// withResponseTime replaces the response_time of the demo config's
// dataset (--response-time).
func withResponseTime(cfg []byte, d time.Duration) ([]byte, error) {
	const line = "    response_time: 500ms\n"
	if !bytes.Contains(cfg, []byte(line)) {
		return nil, fmt.Errorf("examples/dpproxy.yaml no longer has the line %q that --response-time replaces", strings.TrimSpace(line))
	}
	return bytes.Replace(cfg, []byte(line), []byte("    response_time: "+d.String()+"\n"), 1), nil
}

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "keep the clusters (data in DIR, shadow catalog in DIR/shadow), the data and the ledger across restarts (default: temporary directories removed on exit)")
	listen := fs.String("listen", "127.0.0.1:6432", "address analysts connect to")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	adminListen := fs.String("admin-listen", "127.0.0.1:0", "address of the steward's admin endpoint (metrics, dashboard); loopback only, port 0 picks a free one")
	var responseTime optDuration
	fs.Var(&responseTime, "response-time", "pad every DP answer to at least this `duration` (default: examples/dpproxy.yaml's response_time, 500ms); 0s turns padding off")
	citusWorkers := fs.Int("citus-workers", 0, "make the data cluster a Citus coordinator with `N` workers on loopback and distribute the demo tables by patient_id (needs the citus extension installed for PostgreSQL; docs/TESTING.md, \"Distributed PostgreSQL (Citus)\")")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *citusWorkers < 0 || *citusWorkers > 8 {
		return usagef("demo: --citus-workers %d: want 0 (plain PostgreSQL) to 8", *citusWorkers)
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return usagef("demo: --listen %q is not host:port", *listen)
	}
	if h, _, err := net.SplitHostPort(*adminListen); err != nil || !(h == "localhost" || net.ParseIP(h) != nil && net.ParseIP(h).IsLoopback()) {
		return usagef("demo: --admin-listen %q must be a loopback host:port (the demo serves the admin endpoint without TLS)", *adminListen)
	}
	log, err := newLogger(stderr, *logLevel)
	if err != nil {
		return usagef("demo: --log-level: %v", err)
	}
	defer log.Sync()
	// The address taken is found before the clusters start and the data
	// is generated (seconds), not after.
	if err := probeListen(*listen); err != nil {
		return err
	}

	var dataSettings map[string]string
	if *citusWorkers > 0 {
		if err := citus.Check(""); err != nil {
			return err
		}
		dataSettings = citus.Settings
	}
	cluster, shadowCluster, err := startClusters(ctx, *dataDir, dataSettings, log)
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	var workers []*pgcluster.Cluster
	defer func() {
		// The coordinator first: it holds connections to the workers.
		stopClusters([]*pgcluster.Cluster{shadowCluster, cluster}, log)
		stopClusters(workers, log)
	}()
	if *citusWorkers > 0 {
		if workers, err = citus.StartWorkers(ctx, *dataDir, *citusWorkers, false, nil, log); err != nil {
			return err
		}
	}
	if _, err := demo.Setup(ctx, cluster, shadowCluster, demo.Options{Passwords: true, Logger: log}); err != nil {
		return fmt.Errorf("set up demo data: %w", err)
	}
	if len(workers) > 0 {
		if err := demo.Distribute(ctx, cluster, workers, demo.Options{Passwords: true, Logger: log}); err != nil {
			return fmt.Errorf("distribute the demo data with Citus: %w", err)
		}
	}

	pgAddr := net.JoinHostPort(cluster.Host, strconv.Itoa(cluster.Port))
	shadowAddr := net.JoinHostPort(shadowCluster.Host, strconv.Itoa(shadowCluster.Port))
	text, err := demoConfig(examples.Config(), pgAddr, shadowAddr, *listen)
	if err != nil {
		return err
	}
	if responseTime.set {
		if text, err = withResponseTime(text, responseTime.d); err != nil {
			return err
		}
	}
	cfgPath := filepath.Join(cluster.Dir, "dpproxy.yaml")
	if err := os.MkdirAll(filepath.Join(cluster.Dir, "policies"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cluster.Dir, "policies", "hospital.yaml"), examples.HospitalPolicy(), 0o644); err != nil {
		return err
	}
	// TLS on SSLRequest, not required: psql's default sslmode=prefer
	// negotiates it, and sslmode=disable still works.
	if err := demoCertificate(filepath.Join(cluster.Dir, demoTLSDir), "127.0.0.1", "localhost"); err != nil {
		return fmt.Errorf("demo TLS certificate: %w", err)
	}
	if text, err = withDemoTLS(text); err != nil {
		return err
	}
	adminPassword, err := randomPassword()
	if err != nil {
		return err
	}
	text = withDemoOps(text, *adminListen, adminPassword)
	if err := os.WriteFile(cfgPath, text, 0o600); err != nil {
		return err
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	log.Info("demo configuration written", zap.String("config", cfgPath), zap.String("shadow_cluster", shadowAddr))

	return runServer(ctx, cfg, log, stderr, func(addr, adminAddr net.Addr) {
		fmt.Fprintf(stdout, "ready: postgres://alice:alice@%s/%s\n", addr, demo.Database)
		fmt.Fprintf(stdout, "upstream: postgres://%s@%s/%s\n", cluster.Superuser, pgAddr, demo.Database)
		// For the steward's commands while the demo runs, e.g.
		// bin/dpproxy budget show --config <this path>.
		fmt.Fprintf(stdout, "config: %s\n", cfgPath)
		fmt.Fprintf(stdout, "analysts: alice (password alice), bob (password bob)\n")
		if adminAddr != nil {
			// No trailing slash: the README's "$ADMIN/metrics" is then a
			// path the endpoint serves (with a slash, "//metrics" is 307).
			fmt.Fprintf(stdout, "admin: http://%s:%s@%s\n", demoAdminUser, adminPassword, adminAddr)
		}
		fmt.Fprintf(stdout, "audit: %s\n", filepath.Join(cluster.Dir, demoAuditFile))
		for i, w := range workers {
			fmt.Fprintf(stdout, "citus worker %d: postgres://%s@%s/%s\n", i+1, w.Superuser, net.JoinHostPort(w.Host, strconv.Itoa(w.Port)), demo.Database)
		}
		if f, ok := stdout.(*os.File); ok {
			f.Sync()
		}
	})
}

func cmdDemoSetup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo-setup", flag.ContinueOnError)
	adminDSN := fs.String("admin-dsn", os.Getenv("DPPROXY_ADMIN_DSN"), "superuser DSN of the data's PostgreSQL server (default $DPPROXY_ADMIN_DSN)")
	shadowDSN := fs.String("shadow-admin-dsn", os.Getenv("DPPROXY_SHADOW_ADMIN_DSN"), "superuser DSN of a second PostgreSQL server for the shadow catalog (default $DPPROXY_SHADOW_ADMIN_DSN)")
	tlsDir := fs.String("tls-dir", "", "also write the demo's self-signed certificate and key (server.crt, server.key) to DIR, as `dpproxy demo` does (docker-compose.yml)")
	tlsHosts := fs.String("tls-hosts", "localhost,127.0.0.1", "comma-separated host names and addresses the certificate covers")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *tlsDir != "" {
		if err := demoCertificate(*tlsDir, strings.Split(*tlsHosts, ",")...); err != nil {
			return fmt.Errorf("--tls-dir: %w", err)
		}
		fmt.Fprintf(stdout, "demo TLS certificate in %s (%s)\n", *tlsDir, *tlsHosts)
	}
	if *adminDSN == "" {
		return usagef("demo-setup: --admin-dsn DSN (or DPPROXY_ADMIN_DSN) is required")
	}
	if *shadowDSN == "" {
		return usagef("demo-setup: --shadow-admin-dsn DSN (or DPPROXY_SHADOW_ADMIN_DSN) is required: the shadow catalog lives in a second PostgreSQL server")
	}
	log, err := newLogger(stderr, "info")
	if err != nil {
		return err
	}
	defer log.Sync()
	c, err := pgcluster.External(*adminDSN)
	if err != nil {
		return fmt.Errorf("--admin-dsn: %w", err)
	}
	sc, err := pgcluster.External(*shadowDSN)
	if err != nil {
		return fmt.Errorf("--shadow-admin-dsn: %w", err)
	}
	res, err := demo.Setup(ctx, c, sc, demo.Options{Passwords: true, Logger: log})
	if err != nil {
		return fmt.Errorf("set up demo data: %w", err)
	}
	fmt.Fprintf(stdout, "demo data ready (generated: %v)\n", res.Generated)
	return nil
}

// The demo's self-signed TLS certificate and key, in the data directory
// (next to the config that names them with relative paths).
const (
	demoTLSDir  = "tls"
	demoTLSCert = "server.crt"
	demoTLSKey  = "server.key"
)

var tlsLine = regexp.MustCompile(`(?m)^tls:`)

// withDemoTLS adds a tls: section naming the demo's certificate and key
// (TLS offered, not required) to the demo config.
func withDemoTLS(cfg []byte) ([]byte, error) {
	if tlsLine.Match(cfg) {
		return nil, errors.New("examples/dpproxy.yaml has a tls: section; the demo writes its own")
	}
	s := strings.TrimRight(string(cfg), "\n") + "\n\n" +
		"# Added by dpproxy demo: a self-signed certificate made at start-up.\n" +
		"tls:\n" +
		"  cert: " + demoTLSDir + "/" + demoTLSCert + "\n" +
		"  key: " + demoTLSDir + "/" + demoTLSKey + "\n" +
		"  require: false\n"
	return []byte(s), nil
}

// demoCertificate writes a self-signed ECDSA P-256 certificate for the
// given hosts (IP addresses or DNS names) and its key to dir/server.crt and
// dir/server.key (0600), unless a pair that loads, covers the hosts and is
// valid for at least another day is already there (a kept --data-dir).
func demoCertificate(dir string, hosts ...string) error {
	certPath, keyPath := filepath.Join(dir, demoTLSCert), filepath.Join(dir, demoTLSKey)
	if pair, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && pair.Leaf != nil {
		ok := time.Until(pair.Leaf.NotAfter) > 24*time.Hour
		for _, h := range hosts {
			ok = ok && pair.Leaf.VerifyHostname(h) == nil
		}
		if ok {
			return nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "dpproxy demo", Organization: []string{"dpproxy demo (self-signed)"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// The demo's steward user and audit log file (in the data directory).
const (
	demoAdminUser = "steward"
	demoAuditFile = "audit.log"
)

// withDemoOps appends the admin endpoint (on loopback, with a generated
// password) and the audit log to the demo's config.
func withDemoOps(cfg []byte, listen, password string) []byte {
	return append(cfg, fmt.Sprintf(`
# Added by dpproxy demo: the steward's admin endpoint (metrics, health,
# dashboard) on loopback with a generated password, and the audit log.
admin:
  listen: %s
  user: %s
  password: "plain:%s"
audit:
  path: %s
`, listen, demoAdminUser, password, demoAuditFile)...)
}

// randomPassword returns 16 random bytes in hex.
func randomPassword() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", b), nil
}

// probeListen checks that addr can be listened on now: the demo's clusters
// and data take seconds, and a port another server holds should be said
// before them. (Another process may still take it in between; serve then
// says so the same way.)
func probeListen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (choose another address with --listen)", addr, err)
	}
	return ln.Close()
}
