// Privacy-critical: needs DP review.

package rewrite

// The emitted SQL of joins: the joined relation (bounded after the join
// by bounds_sql.go) and the elastic SQL that bounds rows per unit and per
// join value before the join. See join.go for the sensitivity argument.
