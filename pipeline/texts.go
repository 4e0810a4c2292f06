package pipeline

import (
	"strings"

	"github.com/dpproxy/dpproxy/policy"
)

// Texts remembers, per session, what Prepare derives from a DP
// statement's text alone (rewrite.HasPostSyntax, Post, ExplainTarget and
// PublicDistinct are pure functions of the policy and the text), so a
// repeated statement (a dashboard's, a cached answer) goes straight to the
// planner's cache. Nothing derived from session settings or data is kept.
// The zero value is empty and ready; a nil *Texts keeps nothing. Not safe
// for concurrent use.
type Texts struct {
	policy *policy.Dataset
	m      map[string]textFacts
	bytes  int // of the texts held
}

// textFacts is what is known of one statement text.
type textFacts struct {
	// planText is the text planned for it (a flattened post-processing
	// statement's, EXPLAIN looked through; "" not known yet), explain
	// whether it was an EXPLAIN.
	planText string
	explain  bool
	// notDistinct: PublicDistinct does not answer it.
	notDistinct bool
}

// Limits of a session's Texts: it is cleared when full, and longer texts
// are not kept.
const (
	maxTexts     = 256
	maxTextBytes = 64 << 10
	maxText      = 4096
)

func (tc *Texts) get(ds *policy.Dataset, text string) (textFacts, bool) {
	if tc == nil || tc.policy != ds {
		return textFacts{}, false
	}
	d, ok := tc.m[text]
	return d, ok
}

// put records d for text, clearing the cache first when the policy
// changed or it is full.
func (tc *Texts) put(ds *policy.Dataset, text string, d textFacts) {
	if tc == nil || len(text) > maxText {
		return
	}
	size := len(text) + len(d.planText)
	if old, ok := tc.get(ds, text); ok {
		size = len(d.planText) - len(old.planText) // replaced
	}
	if tc.m == nil || tc.policy != ds || len(tc.m) >= maxTexts || tc.bytes+size > maxTextBytes {
		*tc = Texts{policy: ds, m: make(map[string]textFacts)}
		size = len(text) + len(d.planText)
	}
	// A copy: text is often a piece of the client's message, which a key
	// would keep whole (review 74: 40 MiB for 40 short statements sent
	// in 1 MB messages).
	d.planText = strings.Clone(d.planText)
	tc.m[strings.Clone(text)] = d
	tc.bytes += size
}
