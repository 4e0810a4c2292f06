package dpplan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"reflect"
)

// Fingerprint hashes the canonical plan: every field but the fingerprint
// itself, which includes the emitted SQL (and so every bound and the WHERE
// condition). Two statements that differ only in spelling (case, spaces,
// comments, aliases of the table) get the same fingerprint.
//
// The plan is walked by reflection, so an exported field added to Plan (or
// to the types it holds) is covered without changing this code, and written in a
// length-prefixed binary encoding, which is unambiguous and about ten times
// cheaper than the JSON encoding used before (JSON-escaping the SQL's
// quotes and formatting floats were a fifth of a Rewrite). The fingerprint
// keys the persisted answer cache (release.cacheKey): changing the
// encoding only makes earlier cache entries unreachable.
func Fingerprint(p *Plan) string {
	// The SQL, the longest field, is hashed in place rather than copied;
	// the rest of the plan (with SQL "") follows it.
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(binary.AppendUvarint(n[:0], uint64(len(p.SQL))))
	h.Write([]byte(p.SQL))
	c := *p
	c.Fingerprint, c.SQL = "", ""
	h.Write(appendCanonical(make([]byte, 0, 1024), reflect.ValueOf(&c).Elem()))
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// appendCanonical appends an encoding of v that is injective for values of
// one type: strings and slices are length-prefixed, nil pointers and
// non-nil ones are told apart, floats are written by their bits.
func appendCanonical(buf []byte, v reflect.Value) []byte {
	switch v.Kind() {
	case reflect.String:
		buf = binary.AppendUvarint(buf, uint64(v.Len()))
		return append(buf, v.String()...)
	case reflect.Bool:
		if v.Bool() {
			return append(buf, 1)
		}
		return append(buf, 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.AppendVarint(buf, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return binary.AppendUvarint(buf, v.Uint())
	case reflect.Float32, reflect.Float64:
		return binary.BigEndian.AppendUint64(buf, math.Float64bits(v.Float()))
	case reflect.Slice, reflect.Array:
		buf = binary.AppendUvarint(buf, uint64(v.Len()))
		for i := range v.Len() {
			buf = appendCanonical(buf, v.Index(i))
		}
		return buf
	case reflect.Pointer:
		if v.IsNil() {
			return append(buf, 0)
		}
		return appendCanonical(append(buf, 1), v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			// Unexported fields are skipped, as JSON skips them: they are
			// inputs of the emitter (Plan.table, Plan.where), not part of
			// the canonical plan (the SQL is). CanInterface is false
			// exactly for values reached through an unexported field.
			if f := v.Field(i); f.CanInterface() {
				buf = appendCanonical(buf, f)
			}
		}
		return buf
	case reflect.Interface:
		// A condition (dpplan.Pred): its dynamic type's name, then the
		// value, so that nodes of two types with equal fields differ.
		if v.IsNil() {
			return append(buf, 0)
		}
		name := v.Elem().Type().String()
		buf = binary.AppendUvarint(append(buf, 1), uint64(len(name)))
		return appendCanonical(append(buf, name...), v.Elem())
	}
	// Anything else (a map) is not in a plan today; JSON
	// encodes it deterministically (map keys sorted).
	data, err := json.Marshal(v.Interface())
	if err != nil {
		panic("dpplan: fingerprint: " + err.Error())
	}
	buf = binary.AppendUvarint(buf, uint64(len(data)))
	return append(buf, data...)
}
