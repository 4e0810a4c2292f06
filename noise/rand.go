// Privacy-critical: needs DP review.

package noise

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"math/big"
	"sync"
)

// errEntropy reports a failure of the entropy source. It never carries a
// sample or a measurement.
var errEntropy = errors.New("noise: entropy source failed")

// lockedReader serialises reads from a reader that is not safe for
// concurrent use (a seeded test generator). crypto/rand.Reader is used
// directly: it is safe for concurrent use.
type lockedReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return io.ReadFull(l.r, p)
}

// entropy returns the reader a mechanism draws from: crypto/rand unless a
// test injected a seeded reader through Params.Rand.
func entropy(r io.Reader) io.Reader {
	if r == nil {
		return rand.Reader
	}
	return &lockedReader{r: r}
}

// sourceBufSize is how many random bytes one refill reads. One trial of the
// discrete Laplace sampler uses 217 bytes (8 for U, 24·8 for e^{−U/t}, 16
// for V, 1 for the sign) and a sample takes about 1.6 trials; a discrete
// Gaussian trial adds 208, so most samples need one to three refills.
const sourceBufSize = 512

// source is a buffered view of the entropy reader for one sampling call.
// Not safe for concurrent use: every AddNoise call makes its own. Errors are
// sticky: after a failed read every draw returns zero bits and err is set;
// the unbounded loops of the samplers check err so they cannot spin.
type source struct {
	r   io.Reader
	buf [sourceBufSize]byte
	pos int
	err error
}

func newSource(r io.Reader) *source {
	return &source{r: r, pos: sourceBufSize}
}

func (s *source) fill() {
	if s.err != nil {
		clear(s.buf[:])
		s.pos = 0
		return
	}
	if _, err := io.ReadFull(s.r, s.buf[:]); err != nil {
		s.err = errEntropy
		clear(s.buf[:])
	}
	s.pos = 0
}

// uint64 returns 64 uniform bits.
func (s *source) uint64() uint64 {
	if s.pos+8 > sourceBufSize {
		s.fill()
	}
	v := binary.LittleEndian.Uint64(s.buf[s.pos:])
	s.pos += 8
	return v
}

// bit returns one fair coin flip. It spends a whole byte to keep the code
// simple.
func (s *source) bit() bool {
	if s.pos >= sourceBufSize {
		s.fill()
	}
	b := s.buf[s.pos]
	s.pos++
	return b&1 == 1
}

// uniformUint64 returns a uniform integer in [0, n), n ≥ 1, by rejection:
// draws of 64 bits at or above the largest multiple of n below 2⁶⁴ are
// discarded, so every residue is equally likely. The number of rejected
// draws is independent of the value returned.
func (s *source) uniformUint64(n uint64) uint64 {
	if n == 0 {
		panic("noise: uniformUint64(0)")
	}
	// limit = 2⁶⁴ − (2⁶⁴ mod n); accept w < limit. (2⁶⁴ mod n) = (−n) mod n
	// in uint64 arithmetic.
	rem := -n % n
	for {
		w := s.uint64()
		if w <= ^uint64(0)-rem || rem == 0 {
			return w % n
		}
		if s.err != nil {
			return 0
		}
	}
}

// uniformBig returns a uniform integer in [0, n), n ≥ 1: draw bitlen(n)
// random bits and reject values ≥ n (acceptance probability > 1/2). The
// number of rejections is independent of the value returned.
func (s *source) uniformBig(n *big.Int) *big.Int {
	if n.Sign() <= 0 {
		panic("noise: uniformBig(n ≤ 0)")
	}
	if n.IsUint64() {
		return new(big.Int).SetUint64(s.uniformUint64(n.Uint64()))
	}
	bits := n.BitLen()
	words := (bits + 63) / 64
	ws := make([]big.Word, 0, words*2)
	v := new(big.Int)
	for {
		ws = ws[:0]
		for i := 0; i < words; i++ {
			w := s.uint64()
			if i == words-1 && bits%64 != 0 {
				w &= (uint64(1) << (bits % 64)) - 1
			}
			ws = appendWord(ws, w)
		}
		v.SetBits(ws)
		if v.Cmp(n) < 0 {
			return new(big.Int).Set(v)
		}
		if s.err != nil {
			return new(big.Int)
		}
	}
}

// appendWord appends the 64-bit value w to a little-endian big.Word slice,
// for both 32- and 64-bit platforms.
func appendWord(ws []big.Word, w uint64) []big.Word {
	if ^big.Word(0) == big.Word(^uint32(0)) {
		return append(ws, big.Word(uint32(w)), big.Word(uint32(w>>32)))
	}
	return append(ws, big.Word(w))
}
