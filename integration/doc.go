// Package integration holds the end-to-end tests of dpproxy: they build the
// real dpproxy binary, start `dpproxy demo` (a throwaway PostgreSQL cluster
// with the demo dataset, its ledger and shadow catalog), and drive the proxy
// with the real psql binary and with pgx.
//
// Outside CI, a machine without PostgreSQL or psql skips these tests with a
// message saying how to install them; under CI=true (or CI=1) that is a failure.
package integration
