package main

import (
	"testing"

	"github.com/dpproxy/dpproxy/internal/config"
	"github.com/dpproxy/dpproxy/internal/shadow"
)

// The config's public_max_rows bounds are internal/shadow's (config
// imports nothing of the project, so they are written twice).
func TestPublicMaxRows_SameAsShadow(t *testing.T) {
	if config.DefaultPublicMaxRows != shadow.DefaultMaxPublicRows || config.MaxPublicMaxRows != shadow.MaxMaxPublicRows {
		t.Fatalf("config public_max_rows default/max %d/%d, shadow %d/%d", config.DefaultPublicMaxRows, config.MaxPublicMaxRows,
			shadow.DefaultMaxPublicRows, shadow.MaxMaxPublicRows)
	}
}
