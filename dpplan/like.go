// Privacy-critical: needs DP review.

package dpplan

import "strings"

// The work of a LIKE or ILIKE condition on one row
// (TestAttack101_LikeStepsBound, TestAttack101_ConditionsReadLongText).
//
// PostgreSQL matches a pattern against a value in MatchText
// (src/backend/utils/adt/like_match.c): the part of the pattern before its
// first '%' walks the value in lockstep (at most its own length), and each
// later segment S (the characters between one '%' and the next, after the
// '_'s that directly follow the '%', which only skip characters) is looked
// for by scanning the value for S's first character and, at every hit,
// comparing S with the value there until a character differs. Once S has
// matched whole, the answer is final (the rest matches or no later start
// can), so the segments' costs add up. On a value of n bytes, S costs at
// most the scan (n) plus, over the hits, a call, the characters that
// match and the one that does not:
//
//	Σ_i (2 + LCP(S, value[i:])) ≤ 2n + Σ_{k=1}^{|S|} occ(S[:k]),
//
// where occ(P) counts the positions at which P matches ('_' matching any
// character). Two matches of P = S[:k] at distance d < k make d a
// compatible shift of P (P[t] and P[t+d] are equal or one is '_' for every
// t), so matches are at least p_k apart, p_k being P's smallest compatible
// shift (k when none): occ(S[:k]) ≤ n/p_k + 1. A segment therefore costs
// at most n·(3 + Σ_k 1/p_k) + |S| steps: about n·|S| for a segment such as
// 'a______Q' or 'aaaaaaaQ' (p_k = 1), about 5.5·n for '%cancer%'. ILIKE
// first folds the value's case: n steps more. The proof does not depend on
// the value, so the bound holds for every row whose value has at most n
// bytes. The value a LIKE reads is at most MaxConditionTextBytes (pgemit:
// a longer one is NULL to the condition), and the steps above at that
// length are counted, likeStepsPerUnit a unit (PredWork).

// MaxConditionTextBytes bounds the bytes of a text value a condition reads
// (LIKE, ILIKE, a comparison, BETWEEN or IN with text constants): a longer
// value is NULL to the condition (pgemit.PredSQL), so neither the
// condition nor its NOT holds for it. A LIKE's work grows with the
// value's bytes (above); so does a comparison's, which detoasts the value
// whole, and a hashed IN's, which hashes it. At most 256 bytes, a
// comparison costs a short copy and a compare bounded by its constant,
// within its unit of PredWork.
const MaxConditionTextBytes = 256

// likeStepsPerUnit is how many of MatchText's steps weigh one unit of
// PredWork: a step (a byte scanned, a character compared, a call at a
// hit) measured at most 2.4 ns on a loaded 2-core machine ('%aQ%' on 256
// bytes of 'a': a call per byte, 2.8 µs a row for 1,152 steps), rounded
// up to 4 ns, and a unit is
// 1/16 of a row at the default work_rate of 500,000 rows a second
// (125 ns): 32 steps.
const likeStepsPerUnit = 32

// LikeWork is the units of work (PredWork's) of matching pattern, a SQL
// string constant in the canonical form of the planner (the default
// escape '\'), against a value of at most MaxConditionTextBytes: 0 for a
// pattern without '%' or whose only '%'s end it, whose steps the pattern's
// own length already weighs.
func LikeWork(pattern string, ilike bool) int {
	steps := likeSteps(unquotePattern(pattern), MaxConditionTextBytes, ilike)
	return int((steps + likeStepsPerUnit - 1) / likeStepsPerUnit)
}

// likeElem is one element of a parsed pattern: '%', '_' or a literal byte.
type likeElem struct {
	wild byte // '%', '_' or 0 for a literal
	lit  byte
}

// likeSteps bounds MatchText's steps for pattern p (unquoted, default
// escape) on a value of at most n bytes beyond the pattern's lockstep
// part, as above.
func likeSteps(p string, n int, ilike bool) float64 {
	var elems []likeElem
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\' && i+1 < len(p):
			i++
			elems = append(elems, likeElem{lit: p[i]})
		case c == '%' || c == '_':
			elems = append(elems, likeElem{wild: c})
		default:
			elems = append(elems, likeElem{lit: c})
		}
	}
	first := -1
	for i, e := range elems {
		if e.wild == '%' {
			first = i
			break
		}
	}
	if first < 0 {
		return 0
	}
	steps := 0.0
	for i := first; i < len(elems); {
		// elems[i] is a '%': skip the '%'s and '_'s after it.
		j := i
		for j < len(elems) && elems[j].wild != 0 {
			j++
		}
		if j == len(elems) {
			break // a trailing '%' matches the rest at once
		}
		k := j
		for k < len(elems) && elems[k].wild != '%' {
			k++
		}
		seg := elems[j:k]
		h := 0.0
		for l := 1; l <= len(seg); l++ {
			h += 1 / float64(smallestShift(seg[:l]))
		}
		steps += float64(n)*(3+h) + float64(len(seg)) + float64(j-i)
		i = k
	}
	if ilike && steps > 0 {
		steps += float64(n)
	}
	return steps
}

// smallestShift is the smallest d in 1..len(p)-1 such that p[t] and p[t+d]
// are compatible for every t, else len(p). Two literal bytes are
// compatible when they are equal ignoring ASCII case (ILIKE folds case) or
// either is not ASCII (a multi-byte character's bytes are not compared
// here), and '_' is compatible with everything.
func smallestShift(p []likeElem) int {
	for d := 1; d < len(p); d++ {
		ok := true
		for t := 0; t+d < len(p) && ok; t++ {
			ok = compatible(p[t], p[t+d])
		}
		if ok {
			return d
		}
	}
	return len(p)
}

func compatible(a, b likeElem) bool {
	if a.wild != 0 || b.wild != 0 || a.lit >= 0x80 || b.lit >= 0x80 {
		return true
	}
	return lowerASCII(a.lit) == lowerASCII(b.lit)
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// unquotePattern is the text of a pattern constant as pgemit.QuoteString
// writes it: '…' with quotes doubled, or E'…' with backslashes doubled too.
func unquotePattern(q string) string {
	e := strings.HasPrefix(q, "E'")
	if e {
		q = q[1:]
	}
	if len(q) < 2 || q[0] != '\'' || q[len(q)-1] != '\'' {
		return q // not a constant: every character a literal or wildcard
	}
	q = strings.ReplaceAll(q[1:len(q)-1], "''", "'")
	if e {
		q = strings.ReplaceAll(q, `\\`, `\`)
	}
	return q
}
