package linerate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TestReview87_CoreBypassesInnerCheck (low, latent). core.Check asks only
// the inner core's Enabled and then adds itself; Write calls the inner
// core's Write. So whatever the inner core decides in its own Check is
// skipped: a Tee writes every entry to all its cores whatever their levels
// (an Info line lands in an Error-only file), and a sampler's Check, where
// zap samples, never runs (every line passes). Today's only logger is one
// ioCore (cmd/dpproxy/logger.go), where this is harmless; the usual
// wrapper pattern is to call c.Core.Check(e, ce) once Allow lets the
// entry through (and count lines_not_logged in a field added by a
// With-like wrapper, or in the inner core's Write via a wrapped core it
// adds).
func TestReview87_CoreBypassesInnerCheck(t *testing.T) {
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = ""
	var info, errs bytes.Buffer
	tee := zapcore.NewTee(
		zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(&info), zapcore.InfoLevel),
		zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(&errs), zapcore.ErrorLevel),
	)
	log := zap.New(New(1000, 1000).Core(tee, "alice"))
	log.Info("an info line")
	if strings.Contains(errs.String(), "an info line") {
		t.Errorf("an Info entry was written to the Error-level core of a Tee: %s", errs.String())
	}

	var sampled bytes.Buffer
	sampler := zapcore.NewSamplerWithOptions(
		zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(&sampled), zapcore.InfoLevel),
		time.Hour, 1, 0) // the first line of a message per hour, then none
	slog := zap.New(New(1000, 1000).Core(sampler, "alice"))
	for range 10 {
		slog.Info("same message")
	}
	if n := strings.Count(sampled.String(), "same message"); n != 1 {
		t.Errorf("a sampler letting 1 line through wrote %d through the linerate core", n)
	}
}
