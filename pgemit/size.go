package pgemit

import "github.com/dpproxy/dpproxy/internal/pgerr"

// MaxSQL bounds the emitted SQL: PostgreSQL's work per row grows with the
// expressions and conditions in it, and an 800 KB statement became 6.4 MB
// of SQL doing 20× the work on the rows one person's CASE selected (issue
// 14). 256 KiB is 50 times the largest golden plan.
const MaxSQL = 256 << 10

// CheckSize refuses emitted SQL longer than MaxSQL (54000, before the
// charge).
func CheckSize(sql string) error {
	if len(sql) > MaxSQL {
		return pgerr.New(pgerr.ProgramLimitExceeded, "the query is too large to answer: its SQL would be %d bytes, more than %d", len(sql), MaxSQL).
			WithHint("simplify the expressions and conditions, or shorten IN lists")
	}
	return nil
}
