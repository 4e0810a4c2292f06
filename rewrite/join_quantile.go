package rewrite

// Quantiles over joins and with private group keys: their argument is in
// dpplan/join.go.
