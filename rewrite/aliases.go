package rewrite

import (
	"github.com/dpproxy/dpproxy/dpplan"
	"github.com/dpproxy/dpproxy/pgemit"
)

// The plan's types and constants live in package dpplan and the emitter in
// package pgemit; these aliases keep rewrite's API (rewrite.Plan,
// rewrite.MeasureCount, …) for its callers and its own code.

// Types of the plan (dpplan) and of the emitter (pgemit).
type (
	AutoBounds  = dpplan.AutoBounds
	AutoClip    = dpplan.AutoClip
	BoundsProbe = pgemit.BoundsProbe
	ClipBounds  = dpplan.ClipBounds
	ClipColumn  = dpplan.ClipColumn
	Cond        = dpplan.Cond
	Expr        = dpplan.Expr
	Join        = dpplan.Join
	JoinColumn  = dpplan.JoinColumn
	JoinOn      = dpplan.JoinOn
	JoinTable   = dpplan.JoinTable
	Key         = dpplan.Key
	Measure     = dpplan.Measure
	MeasureKind = dpplan.MeasureKind
	OrderItem   = dpplan.OrderItem
	Output      = dpplan.Output
	OutputKind  = dpplan.OutputKind
	Plan        = dpplan.Plan
	Quantile    = dpplan.Quantile
	SampleAgg   = dpplan.SampleAgg
)

// Constants of the plan (dpplan).
const (
	JoinPublic       = dpplan.JoinPublic
	JoinUnit         = dpplan.JoinUnit
	MeasureCount     = dpplan.MeasureCount
	MeasureQuantile  = dpplan.MeasureQuantile
	MeasureRemoved   = dpplan.MeasureRemoved
	MeasureSampleAgg = dpplan.MeasureSampleAgg
	MeasureSum       = dpplan.MeasureSum
	MeasureSumSq     = dpplan.MeasureSumSq
	MeasureUnits     = dpplan.MeasureUnits
	OutputAvg        = dpplan.OutputAvg
	OutputCount      = dpplan.OutputCount
	OutputExpr       = dpplan.OutputExpr
	OutputKey        = dpplan.OutputKey
	OutputQuantile   = dpplan.OutputQuantile
	OutputSampleAgg  = dpplan.OutputSampleAgg
	OutputSum        = dpplan.OutputSum
	OutputVariance   = dpplan.OutputVariance
)

// SampleMid is the midpoint c = l/2 + u/2 of an output range
// (dpplan.SampleMid).
func SampleMid(lower, upper float64) float64 { return dpplan.SampleMid(lower, upper) }

// BoundsProbeSQL is the bounds query of dpproxy policy init
// (pgemit.BoundsProbeSQL).
func BoundsProbeSQL(p BoundsProbe) string { return pgemit.BoundsProbeSQL(p) }
