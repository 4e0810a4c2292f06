package main

import (
	"bytes"
	"crypto/tls"
	"flag"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/examples"
	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/demo"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite examples/docker/dpproxy.yaml from examples/dpproxy.yaml")

const repoRoot = "../.."

// The compose file's proxy config is examples/dpproxy.yaml with the database
// hosts of the compose network (data and shadow servers) and listening on all
// interfaces of the container.
const (
	composePGAddr     = "postgres:5432"
	composeShadowAddr = "postgres-shadow:5432"
	composeListen     = "0.0.0.0:6432"
)

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       string            `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck map[string]any `yaml:"healthcheck"`
		Restart     string         `yaml:"restart"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

func TestDockerCompose(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	pg, shadowPG, proxy, setup := cf.Services["postgres"], cf.Services["postgres-shadow"], cf.Services["dpproxy"], cf.Services["setup"]
	if pg.Image == "" || shadowPG.Image == "" || proxy.Build == "" || setup.Build == "" {
		t.Fatalf("want services postgres and postgres-shadow (image), setup and dpproxy (build); got %+v", cf.Services)
	}
	// The shadow server is a server of its own, with its own storage.
	if len(shadowPG.Volumes) == 0 || len(pg.Volumes) == 0 || shadowPG.Volumes[0] == pg.Volumes[0] {
		t.Errorf("postgres-shadow volumes %v must differ from postgres's %v", shadowPG.Volumes, pg.Volumes)
	}

	// Every service that builds has a Dockerfile, whose Go is new enough.
	for name, s := range cf.Services {
		if s.Build == "" {
			continue
		}
		df, err := os.ReadFile(filepath.Join(repoRoot, s.Build, "Dockerfile"))
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		checkGoVersion(t, string(df))
		if !strings.Contains(string(df), "./cmd/dpproxy") {
			t.Errorf("Dockerfile does not build ./cmd/dpproxy")
		}
	}
	// Dependencies name existing services.
	for name, s := range cf.Services {
		for dep := range s.DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				t.Errorf("service %s depends on unknown service %s", name, dep)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			} else if _, ok := cf.Volumes[src]; !ok {
				t.Errorf("service %s mounts undeclared volume %s", name, src)
			}
		}
	}
	if proxy.DependsOn["setup"].Condition != "service_completed_successfully" || setup.DependsOn["postgres"].Condition != "service_healthy" || setup.DependsOn["postgres-shadow"].Condition != "service_healthy" {
		t.Errorf("want dpproxy after setup completes and setup after postgres and postgres-shadow are healthy")
	}

	// The proxy's config: the mounted file, equal to the example with the
	// compose addresses.
	cfgPath := flagValue(t, proxy.Command, "--config")
	host := hostPath(t, proxy.Volumes, cfgPath)
	got, err := os.ReadFile(filepath.Join(repoRoot, host))
	if err != nil {
		t.Fatal(err)
	}
	want, err := demoConfig(examples.Config(), composePGAddr, composeShadowAddr, composeListen)
	if err != nil {
		t.Fatal(err)
	}
	// The same TLS as the demo (withDemoTLS).
	if want, err = withDemoTLS(want); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(filepath.Join(repoRoot, host), want, 0o644); err != nil {
			t.Fatal(err)
		}
		got = want
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not examples/dpproxy.yaml with %s, %s, listen %s and the demo's tls: section; regenerate it with: go test ./cmd/dpproxy -run DockerCompose -update", host, composePGAddr, composeShadowAddr, composeListen)
	}
	cfg, err := config.Parse(got, host)
	if err != nil {
		t.Fatal(err)
	}
	// Its policies resolve, inside the container, to a mounted directory of
	// valid policy files, one per configured dataset.
	polDir := hostPath(t, proxy.Volumes, path.Join(path.Dir(cfgPath), cfg.Policies))
	dss, err := policy.LoadDir(filepath.Join(repoRoot, polDir))
	if err != nil {
		t.Fatalf("policies mounted from %s: %v", polDir, err)
	}
	for _, ds := range dss {
		if _, ok := cfg.Datasets[ds.Name]; !ok {
			t.Errorf("policy %s has no dataset in %s", ds.Name, host)
		}
	}
	// TLS as in the demo: offered, not required, with the certificate and
	// key that setup's demo-setup --tls-dir writes to a volume the proxy
	// mounts (docker cannot run here: this checks the files agree).
	if cfg.TLS == nil || cfg.TLS.Require || cfg.TLS.Cert != demoTLSDir+"/"+demoTLSCert || cfg.TLS.Key != demoTLSDir+"/"+demoTLSKey {
		t.Fatalf("%s tls = %+v, want the demo's (cert %s/%s, key %s/%s, not required)", host, cfg.TLS, demoTLSDir, demoTLSCert, demoTLSDir, demoTLSKey)
	}
	tlsDir := path.Join(path.Dir(cfgPath), demoTLSDir)
	if got := flagValue(t, setup.Command, "--tls-dir"); got != tlsDir {
		t.Errorf("setup writes the certificate to %q, want %q (where the config's tls: paths resolve)", got, tlsDir)
	}
	vol := func(s []string, ro bool) string {
		for _, v := range s {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 && parts[1] == tlsDir && (len(parts) == 3 && parts[2] == "ro") == ro {
				return parts[0]
			}
		}
		return ""
	}
	pv, sv := vol(proxy.Volumes, true), vol(setup.Volumes, false)
	if _, declared := cf.Volumes[pv]; pv == "" || pv != sv || !declared {
		t.Errorf("want one declared volume mounted on %s by setup (read-write) and dpproxy (read-only); setup %v, dpproxy %v", tlsDir, setup.Volumes, proxy.Volumes)
	}
	hosts := strings.Split(flagValue(t, setup.Command, "--tls-hosts"), ",")
	if !slices.Contains(hosts, "localhost") || !slices.Contains(hosts, "127.0.0.1") {
		t.Errorf("certificate hosts %v must cover localhost and 127.0.0.1 (the published port)", hosts)
	}
	// What demo-setup writes is a pair the config loads.
	dir := t.TempDir()
	if err := demoCertificate(filepath.Join(dir, demoTLSDir), hosts...); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, cfg.TLS.Cert), filepath.Join(dir, cfg.TLS.Key)); err != nil {
		t.Errorf("the certificate demo-setup writes does not load with the config's paths: %v", err)
	}
	df, _ := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if !strings.Contains(string(df), "--chown=65532:65532 /out/tls "+tlsDir) {
		t.Errorf("Dockerfile must create %s owned by the nonroot user, so that the new volume is writable", tlsDir)
	}

	// The published port is the one the proxy listens on.
	_, listenPort, _ := net.SplitHostPort(cfg.Listen)
	if !publishes(proxy.Ports, listenPort) {
		t.Errorf("dpproxy publishes %v, want container port %s (listen: %s)", proxy.Ports, listenPort, cfg.Listen)
	}

	// DSNs: setup's admin DSNs reach the two servers; the config's data
	// DSNs (ledger, upstream) reach the postgres service as a data role, its
	// shadow DSNs the postgres-shadow service as a shadow role, with the
	// passwords demo-setup sets.
	if setup.Command[0] != "demo-setup" {
		t.Errorf("setup runs %q, want demo-setup", setup.Command[0])
	}
	for flagName, svc := range map[string]string{"--admin-dsn": "postgres", "--shadow-admin-dsn": "postgres-shadow"} {
		admin, err := pgx.ParseConfig(flagValue(t, setup.Command, flagName))
		if err != nil {
			t.Fatal(err)
		}
		if admin.Host != svc || admin.Port != 5432 || admin.Password != cf.Services[svc].Environment["POSTGRES_PASSWORD"] || admin.User != "postgres" {
			t.Errorf("setup %s %s@%s:%d does not match the %s service (password from POSTGRES_PASSWORD)", flagName, admin.User, admin.Host, admin.Port, svc)
		}
	}
	type target struct {
		dsn   string
		host  string
		roles []string
	}
	dsns := map[string]target{"ledger": {cfg.Ledger, "postgres", demo.DataRoles}}
	for n, d := range cfg.Datasets {
		dsns[n+".upstream"] = target{d.Upstream, "postgres", demo.DataRoles}
		dsns[n+".shadow"] = target{d.Shadow, "postgres-shadow", demo.ShadowRoles}
		dsns[n+".shadow_admin"] = target{d.ShadowAdmin, "postgres-shadow", demo.ShadowRoles}
	}
	for key, tg := range dsns {
		c, err := pgx.ParseConfig(tg.dsn)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if c.Host != tg.host || c.Port != 5432 {
			t.Errorf("%s reaches %s:%d, want the %s service on 5432", key, c.Host, c.Port, tg.host)
		}
		if !slices.Contains(tg.roles, c.User) || c.Password != c.User {
			t.Errorf("%s logs in as %s with password %q; demo-setup creates %v there with password = role name", key, c.User, c.Password, tg.roles)
		}
	}
	if !publishes(pg.Ports, "5432") {
		t.Errorf("postgres publishes %v, want container port 5432 for the steward", pg.Ports)
	}
}

func flagValue(t *testing.T, cmd []string, name string) string {
	t.Helper()
	for i, a := range cmd {
		if a == name && i+1 < len(cmd) {
			return cmd[i+1]
		}
	}
	t.Fatalf("command %v has no %s", cmd, name)
	return ""
}

// hostPath maps a container path to the repository path mounted there.
func hostPath(t *testing.T, volumes []string, containerPath string) string {
	t.Helper()
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			continue
		}
		src, dst := parts[0], parts[1]
		if containerPath == dst {
			return src
		}
		if rel, ok := strings.CutPrefix(containerPath, dst+"/"); ok {
			return path.Join(src, rel)
		}
	}
	t.Fatalf("%s is not mounted in %v", containerPath, volumes)
	return ""
}

func publishes(ports []string, containerPort string) bool {
	for _, p := range ports {
		if strings.HasSuffix(p, ":"+containerPort) || p == containerPort {
			return true
		}
	}
	return false
}

var goDirective = regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`)
var goImage = regexp.MustCompile(`FROM golang:(\d+)\.(\d+)`)

func checkGoVersion(t *testing.T, dockerfile string) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m, d := goDirective.FindStringSubmatch(string(mod)), goImage.FindStringSubmatch(dockerfile)
	if m == nil || d == nil {
		t.Fatalf("cannot find the go directive (%v) or the golang image (%v)", m, d)
	}
	ver := func(s []string) int { a, _ := strconv.Atoi(s[1]); b, _ := strconv.Atoi(s[2]); return a*1000 + b }
	if ver(d) < ver(m) {
		t.Errorf("Dockerfile builds with golang:%s.%s, older than go.mod's go %s.%s", d[1], d[2], m[1], m[2])
	}
}
