// Not in the privacy-critical set (docs/ARCHITECTURE.md): where a key stands
// in the policy file (for error messages and the order of columns) and the
// text of a window length. A bug here misplaces a message or misreads a
// window, a rate limit under the lifetime cap that window.go requires; the
// bounds and limits every sensitivity rests on are checked in validate.go.

package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// errorf records a problem at the line of the key path (or its deepest
// existing prefix).
func (v *validator) errorf(path []string, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.file, Line: v.line(path), Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) line(path []string) int {
	n := v.root
	if n == nil {
		return 0
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			break
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				line = n.Content[i].Line
				n = n.Content[i+1]
				found = true
				break
			}
		}
		if !found {
			break
		}
	}
	return line
}

func p(parts ...string) []string { return parts }

// sortedKeys returns the keys of m in the order they appear in the file (so
// errors and ColumnOrder follow the file), falling back to name order.
func sortedKeys[T any](root *yaml.Node, path string, m map[string]T) []string {
	order := keyOrder(root, strings.Split(path, "\x00"))
	seen := map[string]bool{}
	var out []string
	for _, k := range order {
		if _, ok := m[k]; ok && !seen[k] {
			out = append(out, k)
			seen[k] = true
		}
	}
	var rest []string
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sortStrings(rest)
	return append(out, rest...)
}

func keyOrder(root *yaml.Node, path []string) []string {
	n := root
	if n == nil {
		return nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	var out []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, n.Content[i].Value)
	}
	return out
}

// ParseWindow parses a window length: a number of days ("30d") or a Go
// duration ("12h").
func ParseWindow(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 1 {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// FormatWindow writes a window as a policy does: 30d, 12h.
func FormatWindow(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}
