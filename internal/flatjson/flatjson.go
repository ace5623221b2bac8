// Package flatjson decodes a JSON object into a struct of scalar fields
// (bools, integers, floats, strings) exactly as encoding/json's Unmarshal
// would, several times faster, or declines: a Decoder returns false for
// anything outside the plain case (an escaped string, a key that is not
// exactly a field's name, a nested value, a number that does not fit), and
// the caller then calls json.Unmarshal, which decodes it or reports what is
// wrong. Job args are mostly such structs, and decoding them with
// encoding/json was the largest single cost of running a no-op job.
//
// It imports only the standard library.
package flatjson

import (
	"encoding"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Decoder decodes into a T; build it with For.
type Decoder[T any] struct {
	fields []field
	byName map[string]int // for structs with many fields; nil otherwise
}

type field struct {
	name   string
	offset uintptr
	kind   reflect.Kind
}

// manyFields is the count of fields from which a key is looked up in a
// map rather than compared with each name in turn.
const manyFields = 8

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// For returns a Decoder for T, or nil when encoding/json would treat T, or
// one of its fields, in any way other than as plain scalars: t is not a
// struct; it or a field's type has an UnmarshalJSON or UnmarshalText
// method; a field is embedded, of any other kind, tagged with the
// ",string" option or with a name this package does not take; or two
// fields have the same name.
func For[T any]() *Decoder[T] {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct || hasUnmarshaler(t) {
		return nil
	}
	d := &Decoder[T]{}
	seen := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			return nil
		}
		if !sf.IsExported() {
			continue
		}
		name := sf.Name
		if tag, ok := sf.Tag.Lookup("json"); ok {
			if tag == "-" {
				continue
			}
			tagName, opts, _ := strings.Cut(tag, ",")
			for o := range strings.SplitSeq(opts, ",") {
				if o == "string" {
					return nil
				}
			}
			if tagName != "" {
				if !plainName(tagName) {
					return nil
				}
				name = tagName
			}
		}
		if !scalar(sf.Type.Kind()) || hasUnmarshaler(sf.Type) {
			return nil
		}
		if seen[name] {
			return nil
		}
		seen[name] = true
		d.fields = append(d.fields, field{name: name, offset: sf.Offset, kind: sf.Type.Kind()})
	}
	if len(d.fields) > manyFields {
		d.byName = make(map[string]int, len(d.fields))
		for i, f := range d.fields {
			d.byName[f.name] = i
		}
	}
	return d
}

func hasUnmarshaler(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}

func scalar(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// plainName reports whether a tag's name is letters, digits, '_' and '-'
// only: encoding/json takes more, and ignores some, which For leaves to it.
func plainName(s string) bool {
	for _, c := range s {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Decode decodes data into *v, which must be zero, and reports whether it
// did: when it did, *v is what json.Unmarshal(data, v) would make of it,
// and json.Unmarshal would return nil. On false, *v may hold part of data:
// zero it before handing it to json.Unmarshal.
func (d *Decoder[T]) Decode(data []byte, v *T) bool {
	base := unsafe.Pointer(v)
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipSpace(data, i+1) == len(data)
	}
	for {
		key, next, ok := plainString(data, i)
		if !ok {
			return false
		}
		f := d.lookup(key)
		if f == nil {
			return false // a folded name or an unknown key: encoding/json's part
		}
		i = skipSpace(data, next)
		if i == len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		if i, ok = f.set(data, i, base); !ok {
			return false
		}
		i = skipSpace(data, i)
		if i == len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

func (d *Decoder[T]) lookup(key []byte) *field {
	if d.byName != nil {
		if n, ok := d.byName[string(key)]; ok {
			return &d.fields[n]
		}
		return nil
	}
	for n := range d.fields {
		if d.fields[n].name == string(key) {
			return &d.fields[n]
		}
	}
	return nil
}

// set decodes the value at data[i:] into f and returns where it ends.
func (f *field) set(data []byte, i int, base unsafe.Pointer) (int, bool) {
	if i == len(data) {
		return 0, false
	}
	p := unsafe.Add(base, f.offset)
	c := data[i]
	if c == 'n' {
		// null leaves a scalar as it is.
		return literal(data, i, "null")
	}
	switch f.kind {
	case reflect.Bool:
		switch c {
		case 't':
			*(*bool)(p) = true
			return literal(data, i, "true")
		case 'f':
			*(*bool)(p) = false
			return literal(data, i, "false")
		}
		return 0, false
	case reflect.String:
		s, next, ok := plainString(data, i)
		if !ok {
			return 0, false
		}
		*(*string)(p) = string(s)
		return next, true
	}
	end, integer, ok := number(data, i)
	if !ok {
		return 0, false
	}
	text := unsafe.String(&data[i], end-i)
	switch f.kind {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if !integer {
			return 0, false
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || !setInt(p, f.kind, n) {
			return 0, false
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if !integer || c == '-' {
			return 0, false
		}
		n, err := strconv.ParseUint(text, 10, 64)
		if err != nil || !setUint(p, f.kind, n) {
			return 0, false
		}
	case reflect.Float32:
		x, err := strconv.ParseFloat(text, 32)
		if err != nil {
			return 0, false
		}
		*(*float32)(p) = float32(x)
	case reflect.Float64:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return 0, false
		}
		*(*float64)(p) = x
	default:
		return 0, false
	}
	return end, true
}

func setInt(p unsafe.Pointer, k reflect.Kind, n int64) bool {
	switch k {
	case reflect.Int:
		if strconv.IntSize == 32 && (n < math.MinInt32 || n > math.MaxInt32) {
			return false
		}
		*(*int)(p) = int(n)
	case reflect.Int8:
		if n < math.MinInt8 || n > math.MaxInt8 {
			return false
		}
		*(*int8)(p) = int8(n)
	case reflect.Int16:
		if n < math.MinInt16 || n > math.MaxInt16 {
			return false
		}
		*(*int16)(p) = int16(n)
	case reflect.Int32:
		if n < math.MinInt32 || n > math.MaxInt32 {
			return false
		}
		*(*int32)(p) = int32(n)
	default:
		*(*int64)(p) = n
	}
	return true
}

func setUint(p unsafe.Pointer, k reflect.Kind, n uint64) bool {
	switch k {
	case reflect.Uint, reflect.Uintptr:
		if strconv.IntSize == 32 && n > math.MaxUint32 {
			return false
		}
		if k == reflect.Uint {
			*(*uint)(p) = uint(n)
		} else {
			*(*uintptr)(p) = uintptr(n)
		}
	case reflect.Uint8:
		if n > math.MaxUint8 {
			return false
		}
		*(*uint8)(p) = uint8(n)
	case reflect.Uint16:
		if n > math.MaxUint16 {
			return false
		}
		*(*uint16)(p) = uint16(n)
	case reflect.Uint32:
		if n > math.MaxUint32 {
			return false
		}
		*(*uint32)(p) = uint32(n)
	default:
		*(*uint64)(p) = n
	}
	return true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func literal(data []byte, i int, word string) (int, bool) {
	if len(data)-i < len(word) || string(data[i:i+len(word)]) != word {
		return 0, false
	}
	return i + len(word), true
}

// plainString returns the contents of the JSON string at data[i:] and
// where it ends, when it holds no escape, no control character and only
// valid UTF-8 (which encoding/json would replace).
func plainString(data []byte, i int) ([]byte, int, bool) {
	if i == len(data) || data[i] != '"' {
		return nil, 0, false
	}
	start := i + 1
	ascii := true
	for j := start; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			s := data[start:j]
			if !ascii && !utf8.Valid(s) {
				return nil, 0, false
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, 0, false
}

// number returns where the JSON number at data[i:] ends, and whether it
// is an integer (no fraction, no exponent); false when there is none.
func number(data []byte, i int) (end int, integer, ok bool) {
	j := i
	if j < len(data) && data[j] == '-' {
		j++
	}
	switch {
	case j < len(data) && data[j] == '0':
		j++
	case j < len(data) && data[j] >= '1' && data[j] <= '9':
		for j < len(data) && isDigit(data[j]) {
			j++
		}
	default:
		return 0, false, false
	}
	integer = true
	if j < len(data) && data[j] == '.' {
		integer = false
		j++
		if j == len(data) || !isDigit(data[j]) {
			return 0, false, false
		}
		for j < len(data) && isDigit(data[j]) {
			j++
		}
	}
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		integer = false
		j++
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			j++
		}
		if j == len(data) || !isDigit(data[j]) {
			return 0, false, false
		}
		for j < len(data) && isDigit(data[j]) {
			j++
		}
	}
	return j, integer, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
