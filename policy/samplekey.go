package policy

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
)

// Sample-and-aggregate splits the privacy units of a query into k disjoint
// blocks by a keyed hash of the unit (HMAC-SHA-256, see
// rewrite/sampleagg.go). The key is secret and per dataset, so an analyst
// can neither predict nor steer which block a unit falls in. It never
// appears in anything an analyst sees, nor in the emitted SQL (which takes
// it as bind parameters, rewrite.Plan.QueryArgs), and is not part of
// Dataset.Version.
//
// A policy names the key with sample_key_file: a file holding at least 32
// random bytes in hex (e.g. `openssl rand -hex 32 > hospital.key`, mode
// 0600), resolved relative to the policy file. Without it, a fresh random
// key is drawn from crypto/rand each time the policy is loaded: still
// secret and per dataset, but block assignments (and so sample-and-aggregate
// answers) then change at every restart or reload and differ between proxy
// instances. See SECURITY.md, "Sample-and-aggregate key".

// minSampleKeyBytes is the smallest accepted key: 256 bits, the output size
// of the HMAC-SHA-256 that uses it.
const minSampleKeyBytes = 32

// maxSampleKeyFileBytes bounds what is read from a key file.
const maxSampleKeyFileBytes = 4096

// SampleKey returns the dataset's secret sample-and-aggregate key (a copy).
func (d *Dataset) SampleKey() []byte { return append([]byte(nil), d.sampleKey...) }

// SampleKeyFromFile reports whether the key came from sample_key_file (and
// so is stable across restarts and proxy instances).
func (d *Dataset) SampleKeyFromFile() bool { return d.sampleKeyFromFile }

// sampleKey loads the key named by sample_key_file, or draws a random one.
func (v *validator) sampleKey(d *Dataset, file string) {
	if file == "" {
		key := make([]byte, minSampleKeyBytes)
		if _, err := rand.Read(key); err != nil {
			v.errorf(nil, "cannot draw a random sample key: %v", err)
			return
		}
		d.sampleKey = key
		return
	}
	path := file
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(v.file), path)
	}
	f, err := os.Open(path)
	if err != nil {
		v.errorf(p("sample_key_file"), "sample_key_file: %v; create it with `openssl rand -hex 32 > %s` (readable only by the proxy)", err, file)
		return
	}
	defer f.Close()
	buf := make([]byte, maxSampleKeyFileBytes+1)
	n, _ := f.Read(buf)
	if n > maxSampleKeyFileBytes {
		v.errorf(p("sample_key_file"), "sample_key_file %s is larger than %d bytes; it must hold one hex key", file, maxSampleKeyFileBytes)
		return
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(buf[:n])))
	if err != nil || len(key) < minSampleKeyBytes {
		// The message never quotes the file's content.
		v.errorf(p("sample_key_file"), "sample_key_file %s must hold at least %d random bytes in hex; create it with `openssl rand -hex 32`", file, minSampleKeyBytes)
		return
	}
	d.sampleKey, d.sampleKeyFromFile = key, true
}
