// Privacy-critical: needs DP review.

package dpplan

import (
	"crypto/sha256"

	"github.com/dpproxy/dpproxy/policy"
)

// SampleAgg describes a sample-and-aggregate plan. Plan.SQL returns one row
// per group that has rows and block count k:
//
//	key_0, …, key_{K−1}, k, S_0, …, S_{m−1}, n
//
// (no key columns when ungrouped) where S_i is the sum over the k blocks of
// the group's clipped, centred answers of the plan's i-th measure
// (Plan.Measures[i], kind MeasureSampleAgg) and n is the group's number of
// distinct units (used only when CountMeasure ≥ 0). A group (or an
// ungrouped query) without input rows has no row: release treats its S and
// n as 0. The SQL takes the key as bind parameters (Plan.QueryArgs).
type SampleAgg struct {
	// Levels are the block counts the SQL computes, ascending.
	Levels []int
	// CountMeasure indexes the MeasureUnits measure whose noisy value
	// chooses k (and, with private keys, selects the groups); −1 when k is
	// fixed by SET dp.sample_blocks (Levels has one element) and every key
	// is public.
	CountMeasure int
	// BlockUnits is the target number of units per block (k = the largest
	// level ≤ ñ/BlockUnits).
	BlockUnits int
	// CountShare is the share of the query's ε (and δ) for the count.
	CountShare float64
	// Calls are the statistics, one per MeasureSampleAgg measure, in
	// order: what the SQL computes per block.
	Calls []SampleCall
}

// ChooseBlocks returns the block count for a noisy unit count: the largest
// level k with k·BlockUnits ≤ count, else the smallest level.
// Post-processing of a released value; also used by EXPLAIN.
func (s *SampleAgg) ChooseBlocks(count float64) int {
	k := s.Levels[0]
	for _, l := range s.Levels {
		if float64(l)*float64(s.BlockUnits) <= count {
			k = l
		}
	}
	return k
}

// RedactedSQL is what EXPLAIN shows of Plan.SQL: the SQL itself, which
// holds no secret (the sample key is the bind parameters $1 and $2, see
// QueryArgs).
func (p *Plan) RedactedSQL() string { return p.SQL }

// QueryArgs returns the values of the bind parameters of Plan.SQL: for a
// sample-and-aggregate plan the HMAC key pads of the dataset's secret
// sample key, $1 = K⊕ipad and $2 = K⊕opad (bytea); nil for other plans.
//
// The key never enters the plan: not Plan.SQL (so neither the fingerprint,
// which hashes the plan, nor the answer cache key and the ledger, which
// use the fingerprint, nor EXPLAIN, which prints the SQL, can contain it),
// and not any field of Plan. release passes these values to the upstream
// as parameters of the extended protocol, and never logs or stores them.
func (p *Plan) QueryArgs(ds *policy.Dataset) []any {
	if p.SampleAgg == nil {
		return nil
	}
	inner, outer := HMACPads(ds.SampleKey())
	return []any{inner, outer}
}

// SampleCall is one sample-and-aggregate call of the select list: Fn
// (corr or regr_r2) of the columns Y and X, clipped to [Lower, Upper] (the
// natural range of Fn, rewrite/sampleagg.go).
type SampleCall struct {
	Fn           string // corr or regr_r2
	Y, X         string // PostgreSQL's argument order: f(Y, X)
	Lower, Upper float64
}

// HMACPads returns the HMAC-SHA-256 key pads K⊕ipad and K⊕opad (RFC 2104;
// a key longer than the 64-byte block is first hashed), so that the SQL
// computes HMAC(K, m) = sha256(K⊕opad || sha256(K⊕ipad || m)).
func HMACPads(key []byte) (inner, outer []byte) {
	const blockSize = 64
	if len(key) > blockSize {
		h := sha256.Sum256(key)
		key = h[:]
	}
	inner, outer = make([]byte, blockSize), make([]byte, blockSize)
	copy(inner, key)
	copy(outer, key)
	for i := range inner {
		inner[i] ^= 0x36
		outer[i] ^= 0x5c
	}
	return inner, outer
}

// SampleMid is the midpoint c = l/2 + u/2 of an output range, as used by
// the SQL and by release (halving is exact in float64, the sum rounds once;
// any c in [l, u] keeps the guarantee).
func SampleMid(lower, upper float64) float64 { return lower/2 + upper/2 }
