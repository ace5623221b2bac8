package flatjson

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

type small struct {
	N int `json:"n"`
}

// wide has more than manyFields fields, so keys are looked up in a map.
type wide struct {
	B      bool          `json:"b"`
	S      string        `json:"s"`
	I      int           `json:"i"`
	I8     int8          `json:"i8"`
	I16    int16         // the field's name
	I32    int32         `json:"i32,omitempty"`
	I64    int64         `json:"i64"`
	U      uint          `json:"u"`
	U8     uint8         `json:"u8"`
	U16    uint16        `json:"u16"`
	U32    uint32        `json:"u32"`
	U64    uint64        `json:"u64"`
	UP     uintptr       `json:"up"`
	F32    float32       `json:"f32"`
	F64    float64       `json:"f64"`
	D      time.Duration `json:"d"`
	Named  string        `json:",omitempty"`
	Upper  string        `json:"x"`
	Lower  string        `json:"X"`
	Skip   string        `json:"-"`
	hidden int           // unexported: not a field to encoding/json
}

var _ = wide{}.hidden

// check decodes data with d and with json.Unmarshal, and fails when d
// decoded it and the two disagree. It reports whether d decoded it.
func check[T any](t *testing.T, d *Decoder[T], data []byte) bool {
	t.Helper()
	var fast, want T
	ok := d.Decode(data, &fast)
	err := json.Unmarshal(data, &want)
	if ok && err != nil {
		t.Fatalf("%q: decoded, json.Unmarshal says %v", data, err)
	}
	if ok && !reflect.DeepEqual(fast, want) {
		t.Fatalf("%q: decoded %+v, json.Unmarshal %+v", data, fast, want)
	}
	return ok
}

func TestDecodeAgreesWithUnmarshal(t *testing.T) {
	sd, wd := For[small](), For[wide]()
	if sd == nil || wd == nil {
		t.Fatal("For declined a flat struct")
	}
	if sd.byName != nil || wd.byName == nil {
		t.Fatal("the lookup is not the one the field count calls for")
	}
	decoded := []string{
		`{"n": 12345}`,
		`{}`,
		" \t\n{ } \r\n",
		`{"n":-0}`,
		`{"n": null}`,
		`{"n": 1, "n": 2}`,
		`{"n": -9223372036854775808}`,
		`{"b": true, "s": "héllo, wörld", "i": -42, "i8": -128, "I16": 32767, "i32": 7, "i64": 9223372036854775807}`,
		`{"u": 0, "u8": 255, "u16": 65535, "u32": 4294967295, "u64": 18446744073709551615, "up": 12}`,
		`{"f32": 3.4e38, "f64": -1.5E-300, "d": 1000000000, "Named": "", "x": "up", "X": "low"}`,
		`{"f64": 0.1, "f32": 0.1, "b": false, "b": null}`,
		`{"f64": 1, "f32": -0}`,
	}
	for _, in := range decoded {
		if !check(t, sd, []byte(in)) && !check(t, wd, []byte(in)) {
			t.Errorf("%q: declined by both", in)
		}
	}
	declined := []string{
		``, `null`, `[]`, `"s"`, `{`, `{"n"}`, `{"n":}`, `{"n": 1,}`, `{"n": 1} x`, `{"n": 1}}`,
		`{"N": 1}`,        // folded: encoding/json's part
		`{"other": 1}`,    // unknown
		`{"n": 1.5}`,      // not an integer
		`{"n": 1e2}`,      // not an integer either
		`{"n": 01}`,       // not JSON
		`{"n": +1}`,       // nor this
		`{"n": "1"}`,      // a string into an int
		`{"n": true}`,     // a bool into an int
		`{"n": {"a": 1}}`, // nested
		`{"n": [1]}`,      // nested
		`{"n": 99999999999999999999}`,
		`{"n": nul}`,
		`{"n\u0041": 1}`, // escaped key
		"{\"n\x01\": 1}", // control character
		"{\"n\xff\": 1}", // invalid UTF-8
		`{"i8": 128}`,    // overflow
		`{"u": -0}`,      // negative into an unsigned
		`{"u8": 256}`,
		`{"f32": 3.5e38}`, // out of float32's range
		`{"f64": 1e400}`,  // out of float64's
		`{"s": "a\"b"}`,   // escaped
		`{"s": 1}`,        // a number into a string
		`{"b": 1}`,        // a number into a bool
		`{"b": tru}`,
		`{"Skip": "x"}`, // a skipped field: unknown here
		`{"hidden": 1}`, // unexported
		`{"d": "1s"}`,
	}
	for _, in := range declined {
		if check(t, sd, []byte(in)) || check(t, wd, []byte(in)) {
			t.Errorf("%q: decoded, should be declined", in)
		}
	}
}

type unmarshalsItself struct{ N int }

func (u *unmarshalsItself) UnmarshalJSON([]byte) error { return nil }

type text string

func (t *text) UnmarshalText([]byte) error { return nil }

type inner struct{ A int }

func TestForDeclines(t *testing.T) {
	for name, ok := range map[string]bool{
		"not a struct":          For[map[string]int]() == nil && For[int]() == nil && For[*small]() == nil,
		"UnmarshalJSON":         For[unmarshalsItself]() == nil,
		"field's UnmarshalJSON": For[struct{ T time.Time }]() == nil,
		"field's UnmarshalText": For[struct{ T text }]() == nil,
		"embedded":              For[struct{ inner }]() == nil,
		"string option": For[struct {
			N int `json:"n,string"`
		}]() == nil,
		"pointer field": For[struct{ N *int }]() == nil,
		"slice field":   For[struct{ N []int }]() == nil,
		"struct field":  For[struct{ N inner }]() == nil,
		"same name twice": For[struct {
			A int `json:"B"`
			B int
		}]() == nil,
		"name with a space": For[struct {
			A int `json:"a b"`
		}]() == nil,
		"empty struct decodes": For[struct{}]() != nil,
	} {
		if !ok {
			t.Error(name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"n": 12345}`, `{}`, `{"n": -1.5e3}`, `{"b": true, "s": "x", "u8": 255, "f32": 1e-45}`,
		`{"i64": -9223372036854775809}`, `{"s": "\u00e9"}`, `{"x": "a", "X": "b"}`,
	} {
		f.Add([]byte(s))
	}
	sd, wd := For[small](), For[wide]()
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, sd, data)
		check(t, wd, data)
	})
}

func BenchmarkDecode(b *testing.B) {
	data := []byte(`{"n": 12345}`)
	d := For[small]()
	b.Run("flatjson", func(b *testing.B) {
		for b.Loop() {
			var v small
			if !d.Decode(data, &v) {
				b.Fatal("declined")
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		for b.Loop() {
			var v small
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
