package pgerr

import (
	"errors"
	"fmt"
	"testing"
)

func TestError(t *testing.T) {
	cause := errors.New("upstream said: value 4711")
	base := New(InsufficientPrivilege, "only aggregate queries are answered")
	e := base.WithHint("use COUNT(*)").WithDetail("raw rows").WithPosition(8).Wrap(cause)
	if base.Hint != "" || base.Err != nil {
		t.Fatal("With* and Wrap must not modify the receiver")
	}
	if e.SQLState() != "42501" || e.Hint != "use COUNT(*)" || e.Detail != "raw rows" || e.Position != 8 {
		t.Fatalf("e = %+v", e)
	}
	if !errors.Is(e, cause) {
		t.Fatal("Wrap must keep the cause for errors.Is")
	}
	// The cause is for logs only: Error() shows code, message and hint.
	if got := e.Error(); got != "42501: only aggregate queries are answered (hint: use COUNT(*))" {
		t.Fatalf("Error() = %q", got)
	}
	wrapped := fmt.Errorf("route: %w", e)
	if pe, ok := As(wrapped); !ok || pe != e {
		t.Fatal("As must find the *Error in a chain")
	}
	if _, ok := As(cause); ok {
		t.Fatal("As found an *Error where there is none")
	}
}
