package integration

import (
	"io"
	"sync"
)

// lockedWriter serialises writes from the child's stderr copier and reads
// by tests.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
