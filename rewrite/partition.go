package rewrite

import (
	"strings"

	"github.com/dpproxy/dpproxy/internal/pgerr"
	"github.com/dpproxy/dpproxy/policy"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Private group keys and DP partition selection: the planning side.
//
// A GROUP BY column without public_values in the policy (diagnosis, a
// free-text city, …) has no public domain: the set of its values is itself
// private (one rare diagnosis can identify a patient). Such a key is planned
// as a Private key (no Domain) and the plan's groups become data-dependent.
// The standard remedy is DP partition selection (Korolova, Kenthapadi,
// Mishra, Ntoulas, "Releasing search queries and clicks privately", WWW
// 2009; Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo, Gipson,
// "Differentially Private SQL with Bounded User Contribution", PoPETs 2020,
// §3 and §4; Desfontaines, Voss, Gipson, Mandayam, "Differentially private
// partition selection", PoPETs 2022):
//
//  1. contribution bounding: each unit contributes to at most L0 =
//     max_groups_per_unit groups (the hash-ordered group choice of dpplan/bounds.go;
//     a private key has no domain to cap L0 by, so L0 is the policy's);
//  2. per group, the SQL returns the bounded measures and the number n of
//     distinct units left in the group after bounding; each unit adds
//     exactly 1 to n in each of its ≤ L0 groups, so the vector of unit
//     counts has L1 sensitivity L0 and L2 sensitivity √L0, and a group
//     that exists only because of one unit has n = 1;
//  3. release (release/partition.go) adds noise to n and keeps the group
//     only if the noisy count reaches a threshold τ chosen so that a group
//     with n = 1 is kept with probability at most δ_p = 1 − (1−δ)^{1/L0}
//     (noise/threshold.go); the measures are then noised and released for
//     kept groups only. Key values are released only for kept groups.
//
// The selection needs δ > 0: with δ = 0 no threshold can hide a group that
// one unit creates (its mere presence is then an unbounded privacy loss).
// Release refuses a plan with private keys when the query's δ is 0.
//
// Private keys combine with public keys: the partition is the key tuple
// (rows whose public key is outside its domain are still not counted). Rows
// whose private key is NULL are not counted, as for every other key, so the
// NULL group is never released.

// privateKeyHint says how to group by a column without public values.
const privateKeyHint = "grouping by a column without public values uses DP partition selection: only groups with enough distinct units are released"

// privateKey plans GROUP BY of a declared, visible column without public
// values (not the unit column: every group would hold one unit, and
// partition selection would drop all of them).
func (b *builder) privateKey(at ast.Node, ci colInfo) (Key, error) {
	if b.join != nil {
		// Joins bounded after the join only (join_partition.go).
		if err := b.joinPrivateKey(at, ci); err != nil {
			return Key{}, err
		}
	}
	if ci.col == nil || ci.unit {
		return Key{}, b.errAt(at, pgerr.FeatureNotSupported, "GROUP BY the unit column %s is not supported: every group would hold one %s", ci.name, b.privacyUnit()).
			WithHint("GROUP BY a column with public_values in the policy (%s) or another column; %s", strings.Join(b.publicKeys(), ", "), privateKeyHint)
	}
	return Key{Column: ci.name, Type: ci.col.Type, Private: true}, nil
}

func (b *builder) privacyUnit() string {
	if b.ds.PrivacyUnit != "" {
		return b.ds.PrivacyUnit
	}
	return "privacy unit"
}

// privateKeyPGType is the PostgreSQL type reported for a private key: the
// declared type, with int keys as int8 (the values are not known in
// advance, so the widest integer type).
func privateKeyPGType(t policy.Type) string {
	switch t {
	case policy.TypeInt:
		return "int8"
	case policy.TypeNumeric:
		return "numeric"
	case policy.TypeFloat:
		return "float8"
	case policy.TypeDate:
		return "date"
	case policy.TypeBool:
		return "bool"
	}
	return "text"
}
