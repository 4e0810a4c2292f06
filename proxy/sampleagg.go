package proxy

import (
	"strconv"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/dpproxy/dpproxy/rewrite"
)

// settingSampleBlocks is SET dp.sample_blocks = k: the number of
// sample-and-aggregate blocks (rewrite/sampleagg.go; default: chosen from
// a noisy unit count).
const settingSampleBlocks = "dp.sample_blocks"

// Session contribution bounds (dpplan/bounds.go, "Bounds per query"):
// tighter than the policy's, never looser (rewrite refuses those when the
// query is planned, naming the policy's bound).
const (
	settingMaxRowsPerUnit   = "dp.max_rows_per_unit"
	settingMaxGroupsPerUnit = "dp.max_groups_per_unit"
)

// checkContributionBound: a whole number from 1 to 1,000,000, and no
// looser than every protected table of the dataset allows (a value no
// table accepts had been taken by SET and refused by every query after:
// new-user run). Whether a query's own table accepts it is the planner's
// check (rewrite queryBounds), which also knows whether the query groups.
func checkContributionBound(name string) func(*session, string) (string, error) {
	return func(s *session, v string) (string, error) {
		k, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || k < 1 || k > 1_000_000 {
			return "", invalidValue(name, v).
				WithHint("%s must be a whole number ≥ 1 no larger than the policy's, e.g. SET %s = 3; RESET it for the policy's", name, name)
		}
		if most := policyBoundMost(s, name); most > 0 && k > most {
			return "", invalidValue(name, v).
				WithHint("a session may only tighten contribution bounds: no table of %s allows more than %d; SET %s to at most %d, or RESET it", s.ds.Policy.Name, most, name, most)
		}
		return strconv.Itoa(k), nil
	}
}

// policyBoundMost is the loosest value of a contribution-bound setting any
// protected table of the session's dataset accepts: max_groups_per_unit,
// or for rows the whole allowance max_rows_per_unit × max_groups_per_unit
// (an ungrouped query's); 0 when there is no dataset.
func policyBoundMost(s *session, name string) int {
	if s == nil || s.ds == nil || s.ds.Policy == nil {
		return 0
	}
	most := 0
	for _, t := range s.ds.Policy.Tables {
		if t.Public {
			continue
		}
		b := t.MaxGroupsPerUnit
		if name == settingMaxRowsPerUnit {
			b = t.Allowance()
		}
		most = max(most, b)
	}
	return most
}

// maxSampleBlocks matches rewrite's limit on dp.sample_blocks.
const maxSampleBlocks = 1 << 20

// checkSampleBlocks: an integer 2 … maxSampleBlocks.
func checkSampleBlocks(_ *session, v string) (string, error) {
	k, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || k < 2 || k > maxSampleBlocks {
		return "", invalidValue(settingSampleBlocks, v).
			WithHint("dp.sample_blocks must be an integer from 2 to %d, e.g. SET dp.sample_blocks = 64; RESET it to choose k from a noisy unit count", maxSampleBlocks)
	}
	return strconv.Itoa(k), nil
}

// rewriteOptions are the session settings that change a DP plan.
func (c *conn) rewriteOptions() rewrite.Options {
	var o rewrite.Options
	if v := c.sess.settings[settingSampleBlocks]; v != "" {
		o.SampleBlocks, _ = strconv.Atoi(v)
	}
	if v := c.sess.settings[settingMaxRowsPerUnit]; v != "" {
		o.MaxRowsPerUnit, _ = strconv.Atoi(v)
	}
	if v := c.sess.settings[settingMaxGroupsPerUnit]; v != "" {
		o.MaxGroupsPerUnit, _ = strconv.Atoi(v)
	}
	o.NoBias = c.sess.settings[settingBias] == "off"
	o.AutoBounds = c.sess.settings[settingContribution] == policy.ContributionAuto
	o.AutoClip = c.sess.settings[settingClipping] == policy.ClippingAuto
	if tz := c.sess.settings["timezone"]; !rewrite.UTCZone(tz) {
		// timestamptz literals compared with date columns are folded in
		// the session's zone (rewrite/datefold.go); a numeric offset
		// leaves Location nil and such literals are refused.
		o.TimeZone = tz
		if !isOffset(tz) {
			o.Location, _ = time.LoadLocation(tz)
		}
	}
	// Relative dates (now(), current_date …) are folded at the
	// statement's start; zero outside a statement (a Describe), where
	// rewrite reads the clock itself.
	o.Now = c.sess.stmtStart
	return o
}
