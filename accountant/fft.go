// Privacy-critical: needs DP review.

package accountant

import (
	"math"
	"math/bits"
	"math/cmplx"
)

// fftConvolve returns the linear convolution of a and b through a radix-2
// complex FFT. The caller bounds its rounding error (see pmf.convolve).
func fftConvolve(a, b []float64) []float64 {
	n := len(a) + len(b) - 1
	size := 1 << bits.Len(uint(n-1))
	fa := make([]complex128, size)
	fb := make([]complex128, size)
	for i, x := range a {
		fa[i] = complex(x, 0)
	}
	for i, x := range b {
		fb[i] = complex(x, 0)
	}
	fft(fa, false)
	fft(fb, false)
	for i := range fa {
		fa[i] *= fb[i]
	}
	fft(fa, true)
	out := make([]float64, n)
	for i := range out {
		out[i] = real(fa[i]) / float64(size)
	}
	return out
}

// fft is an in-place iterative radix-2 Cooley–Tukey transform (len(x) a
// power of two); inverse uses e^{+2πi/n} and does not scale.
func fft(x []complex128, inverse bool) {
	n := len(x)
	shift := 64 - uint(bits.Len(uint(n-1)))
	for i := 0; i < n; i++ {
		j := int(bits.Reverse64(uint64(i)) >> shift)
		if i < j {
			x[i], x[j] = x[j], x[i]
		}
	}
	sign := -1.0
	if inverse {
		sign = 1
	}
	// Twiddles e^{∓2πik/n} computed directly (not by repeated
	// multiplication) to keep the error at O(1) ulp; the stage of length L
	// uses every (n/L)-th one.
	tw := make([]complex128, n/2)
	for k := range tw {
		tw[k] = cmplx.Rect(1, sign*2*math.Pi*float64(k)/float64(n))
	}
	for length := 2; length <= n; length <<= 1 {
		half := length / 2
		stride := n / length
		for start := 0; start < n; start += length {
			for k := 0; k < half; k++ {
				u := x[start+k]
				v := x[start+k+half] * tw[k*stride]
				x[start+k] = u + v
				x[start+k+half] = u - v
			}
		}
	}
}
