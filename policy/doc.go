// Package policy owns the dataset policy file: its YAML format, strict
// decoding, validation, and the immutable [Dataset] value the rest of dpproxy
// reads.
//
// The bounds, contribution limits and budgets declared here are the
// premises of every sensitivity computation, and their validation
// (validate.go, window.go: privacy-critical, needs DP review) makes a policy
// that loads internally consistent (finite bounds, lower ≤ upper, positive
// contribution limits, a unit column on every protected table); validation
// errors name the file, the line and what to change.
//
// policy imports only the standard library and yaml.v3. Loaded values are
// immutable: callers must not modify a *Dataset after Load returns it;
// reloading produces a new value.
//
// # Joins
//
// A public table (public: true) has no unit column and no contribution
// limits; it may be joined to protected tables on any columns, and its
// declared columns may be used in WHERE and, with public_values, GROUP BY
// (its rows are not read at planning time, so the domain of released
// groups must be declared like any other). Its declared, visible columns
// are copied into the shadow catalog (internal/shadow), where statements
// that name only public tables read them: declaring a table public
// publishes those columns to every analyst of the dataset. Joins of public
// tables with one protected table, or with protected tables joined on
// the unit, need no multiplicity (contributions are bounded after the
// join); max_rows_per_value on a column of a public table declares the
// most rows that share one value of it (1: a unique key), which only
// tightens the work bound of joins on that column (dpplan/work.go).
// Protected tables are joined on their unit columns only.
//
// # File format
//
//	dataset: hospital            # the database name analysts connect to
//	description: Outpatient visits
//	privacy_unit: patient        # the protected entity, named for humans
//	budget:                      # per analyst, for this dataset
//	  epsilon: 3.0
//	  delta: 1.0e-6
//	  accountant: pure           # pure | advanced | rdp | zcdp | pld
//	  global_epsilon: 20         # optional cap summed over all analysts
//	  incident_limit: 1          # errors after a charge before the analyst is suspended (1–10, default 1)
//	  min_epsilon_per_query: 0.001 # floor on one query's ε (default 0.001)
//	defaults:
//	  epsilon: 0.1               # per query unless SET dp.epsilon
//	  mechanism: laplace         # laplace | gaussian
//	tables:
//	  visits:
//	    schema: public           # optional, default public
//	    unit_column: patient_id
//	    max_groups_per_unit: 4   # L0: groups at full weight (L0·R rows in all)
//	    max_rows_per_unit: 5     # L∞: rows one unit may contribute per group
//	    max_rows: 1000000        # optional bound on the table's rows: work bound and time slot before the charge
//	    columns:
//	      age:  {type: int, lower: 0, upper: 110}
//	      cost: {type: numeric, lower: 0, upper: 20000}
//	      visit_date: {type: date, lower: 2020-01-01, upper: 2024-12-31}
//	      department: {type: text, public_values: [cardiology, oncology]}
//	      diagnosis: {type: text}
//	      notes: {access: none}  # never visible, not even in the catalog
//	      ward_id: {type: int} # join multiplicity
//	  regions:
//	    public: true             # no personal data
//	    columns:                 # declare the columns queries may use
//	      region_id: {type: int, max_rows_per_value: 1} # unique
//	      name: {type: text, public_values: [north, south]}
//	analysts:
//	  bob: {epsilon: 1.0}        # per-analyst budget override
package policy
