package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxPolicyBytes bounds the size of a policy file; real policies are a few KB.
const maxPolicyBytes = 4 << 20

// Error is one problem in a policy file, with its location.
type Error struct {
	File string
	Line int // 1-based; 0 when unknown
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Errors is the list of problems found in one or more policy files.
type Errors []*Error

func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Load reads and validates one policy file.
func Load(path string) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open policy: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// LoadDir loads every *.yaml and *.yml file of dir. Two files that declare
// the same dataset are an error.
func LoadDir(dir string) ([]*Dataset, error) {
	var paths []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		paths = append(paths, m...)
	}
	sort.Strings(paths)
	if len(paths) == 0 {
		return nil, fmt.Errorf("no policy files (*.yaml) in %s", dir)
	}
	var out []*Dataset
	var errs Errors
	seen := map[string]string{}
	for _, p := range paths {
		d, err := Load(p)
		if err != nil {
			var pe Errors
			if errors.As(err, &pe) {
				errs = append(errs, pe...)
				continue
			}
			return nil, err
		}
		if prev, dup := seen[d.Name]; dup {
			errs = append(errs, &Error{File: p, Line: 1, Msg: fmt.Sprintf("dataset %q is already declared in %s; each dataset needs exactly one policy file", d.Name, prev)})
			continue
		}
		seen[d.Name] = p
		out = append(out, d)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// Parse reads and validates one policy document; name is used in error
// messages (usually the file path). The returned error is of type Errors
// when the document was read but is invalid.
func Parse(r io.Reader, name string) (*Dataset, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read policy %s: %w", name, err)
	}
	if len(data) > maxPolicyBytes {
		return nil, Errors{{File: name, Msg: fmt.Sprintf("policy file is larger than %d bytes", maxPolicyBytes)}}
	}
	var raw rawDataset
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		return nil, YAMLErrors(name, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, Errors{{File: name, Msg: "more than one YAML document; put one dataset in each policy file"}}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, YAMLErrors(name, data, err)
	}
	sum := sha256.Sum256(data)
	v := &validator{file: name, root: &root}
	d := v.dataset(&raw)
	if len(v.errs) > 0 {
		return nil, v.errs
	}
	d.Version = hex.EncodeToString(sum[:8])
	d.Path = name
	return d, nil
}

// YAMLErrors turns yaml.v3's errors ("line N: …") into Errors with lines,
// in words a steward reads (an unknown key, what a key needs): data is the
// document, whose lines name the key of a type error. dpproxy.yaml's
// loader (internal/config) uses ConfigYAMLErrors.
func YAMLErrors(file string, data []byte, err error) error {
	return yamlErrors(file, data, err, "docs/POLICY.md")
}

// ConfigYAMLErrors is YAMLErrors for dpproxy.yaml, whose reference is
// docs/CONFIGURATION.md.
func ConfigYAMLErrors(file string, data []byte, err error) error {
	return yamlErrors(file, data, err, "docs/CONFIGURATION.md")
}

// yamlErrors is YAMLErrors with ref, the document that lists the keys.
func yamlErrors(file string, data []byte, err error, ref string) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var out Errors
		for _, m := range te.Errors {
			out = append(out, lineError(file, data, m, ref))
		}
		return out
	}
	return Errors{lineError(file, data, strings.TrimPrefix(err.Error(), "yaml: "), ref)}
}

func lineError(file string, data []byte, msg, ref string) *Error {
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err == nil {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
	}
	if strings.HasPrefix(msg, "field ") && strings.Contains(msg, " not found in type ") {
		field := strings.TrimSuffix(strings.TrimPrefix(msg, "field "), msg[strings.Index(msg, " not found"):])
		msg = fmt.Sprintf("unknown key %q; check its spelling against the reference in %s", field, ref)
	}
	if m := unmarshalError.FindStringSubmatch(msg); m != nil {
		key := keyAt(data, line)
		if key == "" && m[2] != "" {
			key = flowKeyOf(data, line, m[2])
		}
		msg = typeErrorText(key, m[1], m[2], m[3], ref)
	}
	return &Error{File: file, Line: line, Msg: msg}
}

// unmarshalError is yaml.v3's type error: the YAML tag, the value when it
// is a scalar, and the Go type it could not become.
var unmarshalError = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+)$")

// typeErrorText says in the policy's words what a key needs and what it
// got (never a Go type name: "cannot unmarshal !!str into int64" told a
// steward nothing): `max_rows needs a whole number, not the text "lots"`.
func typeErrorText(key, tag, value, goType, ref string) string {
	want := "a text"
	switch t := strings.TrimLeft(goType, "*"); {
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		want = "a whole number"
	case strings.HasPrefix(t, "float"):
		want = "a number"
	case t == "bool":
		want = "true or false"
	case strings.HasPrefix(t, "[]"):
		want = "a list ([a, b] or lines starting with -)"
	case strings.HasSuffix(t, "Duration"):
		want = "a duration (30s, 500ms, 2m)"
	case strings.HasPrefix(t, "map[") || strings.Contains(t, "."):
		// A struct of the file's format (policy.rawTable, config.TLSConfig,
		// *config.RateLimit): named types of scalars decode from a scalar.
		want = "keys with values (key: value, one per line, or {key: value, ...})"
	}
	got := "a value of another kind"
	switch tag {
	case "str":
		got = fmt.Sprintf("the text %q", value)
	case "int", "float":
		got = "the number " + value
	case "bool":
		got = value
	case "null":
		got = "nothing"
	case "seq":
		got = "a list"
	case "map":
		got = "keys with values"
	}
	what := "this value"
	if key != "" {
		what = key
	}
	return fmt.Sprintf("%s needs %s, not %s; see the reference in %s", what, want, got, ref)
}

// flowKeyOf finds, on line of data, the key of a flow mapping whose
// value is the scalar value ("{type: text, public_values: F, M}": the
// text "F" is public_values'), or "" when none or several match.
func flowKeyOf(data []byte, line int, value string) string {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return ""
	}
	// The value comes from the YAML library's message, which may cut a
	// character in two: a pattern that does not compile matches nothing
	// (FuzzPolicyParse found a panic on "〰〰\xe3...").
	re, err := regexp.Compile(`([A-Za-z_][A-Za-z0-9_]*):\s*` + regexp.QuoteMeta(value) + `\s*[,}]`)
	if err != nil {
		return ""
	}
	ms := re.FindAllStringSubmatch(lines[line-1], -1)
	if len(ms) != 1 {
		return ""
	}
	return ms[0][1]
}

// keyAt is the key a type error on line (1-based) of data is about: the
// key written on the line ("key: value"); for a sequence item ("- …"),
// the key the sequence is the value of, on the nearest line above with
// less indentation; "" when the line is a flow mapping ("key: {a: 1, b:
// 2}", whose key at fault the line cannot tell) or holds no key.
func keyAt(data []byte, line int) string {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return ""
	}
	raw := lines[line-1]
	l := strings.TrimSpace(raw)
	if strings.HasPrefix(l, "- ") || l == "-" {
		indent := len(raw) - len(strings.TrimLeft(raw, " "))
		for i := line - 2; i >= 0; i-- {
			up := lines[i]
			t := strings.TrimSpace(up)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			if len(up)-len(strings.TrimLeft(up, " ")) < indent || !strings.HasPrefix(t, "-") && len(up)-len(strings.TrimLeft(up, " ")) <= indent {
				k, rest, ok := strings.Cut(t, ":")
				if !ok || strings.TrimSpace(strings.SplitN(rest, "#", 2)[0]) != "" || strings.ContainsAny(k, "{}[],#\"' ") {
					return ""
				}
				return k
			}
		}
		return ""
	}
	k, rest, ok := strings.Cut(l, ":")
	if !ok || strings.ContainsAny(k, "{}[],#\"' ") || k == "" || strings.HasPrefix(strings.TrimSpace(rest), "{") {
		return ""
	}
	return k
}

// The raw, as-written form of the file. Unknown keys are errors.
type rawDataset struct {
	Dataset     string                `yaml:"dataset"`
	Description string                `yaml:"description"`
	PrivacyUnit string                `yaml:"privacy_unit"`
	Budget      *rawBudget            `yaml:"budget"`
	Defaults    *rawDefaults          `yaml:"defaults"`
	Tables      map[string]*rawTable  `yaml:"tables"`
	Analysts    map[string]*rawBudget `yaml:"analysts"`
	// Teams are analyst groups sharing one budget (window.go).
	Teams map[string]*rawTeam `yaml:"teams"`
	// SampleKeyFile names the secret sample-and-aggregate key (samplekey.go).
	SampleKeyFile string `yaml:"sample_key_file"`
	// MinUnitsPerCell suppresses released cells with too few units
	// (Dataset.MinUnitsPerCell).
	// A float, so that 10.5 is an error rather than read as 10 (yaml.v3
	// truncates a float into an int field).
	MinUnitsPerCell *float64 `yaml:"min_units_per_cell"`
}

type rawBudget struct {
	Epsilon       *float64 `yaml:"epsilon"`
	Delta         *float64 `yaml:"delta"`
	Accountant    string   `yaml:"accountant"`
	GlobalEpsilon *float64 `yaml:"global_epsilon"`
	GlobalDelta   *float64 `yaml:"global_delta"`
	IncidentLimit *int     `yaml:"incident_limit"`
	// MinEpsilonPerQuery is the floor on the ε of one query (Budget).
	MinEpsilonPerQuery *float64 `yaml:"min_epsilon_per_query"`
	// Window and Lifetime: budget renewal (window.go).
	Window   string       `yaml:"window"`
	Lifetime *rawLifetime `yaml:"lifetime"`
}

type rawLifetime struct {
	Epsilon       *float64 `yaml:"epsilon"`
	Delta         *float64 `yaml:"delta"`
	GlobalEpsilon *float64 `yaml:"global_epsilon"`
	GlobalDelta   *float64 `yaml:"global_delta"`
}

type rawTeam struct {
	Members         []string `yaml:"members"`
	Epsilon         *float64 `yaml:"epsilon"`
	Delta           *float64 `yaml:"delta"`
	LifetimeEpsilon *float64 `yaml:"lifetime_epsilon"`
	LifetimeDelta   *float64 `yaml:"lifetime_delta"`
}

type rawDefaults struct {
	Epsilon      *float64 `yaml:"epsilon"`
	Delta        *float64 `yaml:"delta"`
	Mechanism    string   `yaml:"mechanism"`
	Contribution string   `yaml:"contribution"`
	Clipping     string   `yaml:"clipping"`
}

type rawTable struct {
	Schema           string                `yaml:"schema"`
	Public           bool                  `yaml:"public"`
	UnitColumn       string                `yaml:"unit_column"`
	MaxGroupsPerUnit *int                  `yaml:"max_groups_per_unit"`
	MaxRowsPerUnit   *int                  `yaml:"max_rows_per_unit"`
	MaxRows          *int64                `yaml:"max_rows"`
	Columns          map[string]*rawColumn `yaml:"columns"`
}

type rawColumn struct {
	Type         string   `yaml:"type"`
	Lower        *string  `yaml:"lower"`
	Upper        *string  `yaml:"upper"`
	PublicValues []string `yaml:"public_values"`
	Access       string   `yaml:"access"`
	// MaxRowsPerValue is the declared join multiplicity (policy/doc.go).
	MaxRowsPerValue *int `yaml:"max_rows_per_value"`
}
