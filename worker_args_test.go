package pgqueue

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue/internal/flatjson"
)

type argsProbe struct {
	N    int            `json:"n"`
	S    string         `json:"s"`
	M    map[string]any `json:"m"`
	List []int          `json:"list"`
}

// unmarshalArgs decodes as json.Unmarshal does, the same values and the
// same errors, however many times its kept decoders were used before.
func TestUnmarshalArgs(t *testing.T) {
	inputs := []string{
		`{"n":1,"s":"a","m":{"k":[1,2]},"list":[3]}`,
		`{}`, `null`, `{"n":2} `, ` {"n":3}`, `{"n":"not a number"}`, `{"n":1`, `{"n":1}{"n":2}`,
		`{"n":1} x`, ``, `[1]`, `{"s":"` + strings.Repeat("x", argsDecoderMax) + `"}`, `{"s":"\u00e9\ud83d\ude00"}`,
	}
	for round := range 3 { // the second and third rounds reuse decoders
		for _, in := range inputs {
			var got, want argsProbe
			gotErr := unmarshalArgs([]byte(in), &got)
			wantErr := json.Unmarshal([]byte(in), &want)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("round %d, %.40q: got %+v, %v; want %+v, %v", round, in, got, gotErr, want, wantErr)
			}
		}
	}
}

type flatArgs struct {
	N int    `json:"n"`
	S string `json:"s"`
	B bool   `json:"b"`
}

func (flatArgs) Kind() string { return "flat_args" }

// decodeArgs with a flatjson decoder gives what it gives without one,
// for args the decoder takes and for those it leaves to encoding/json.
func TestDecodeArgsFastPath(t *testing.T) {
	fast := flatjson.For[flatArgs]()
	if fast == nil {
		t.Fatal("flatjson declined flatArgs")
	}
	for _, in := range []string{
		`{"n": 1, "s": "a", "b": true}`,  // taken
		`{"N": 2, "s": "b"}`,             // a folded key
		`{"n": 3, "s": "c\"", "x": [1]}`, // an escape, an unknown key
		`{"n": 4, "n": "x"}`,             // an error after a field was set
		`{"n": 1.5}`, `null`, `[]`,
	} {
		row := &JobRow{ID: 7, EncodedArgs: []byte(in)}
		got, gotErr := decodeArgs(row, fast)
		want, wantErr := decodeArgs[flatArgs](row, nil)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("%s: error %v, want %v", in, gotErr, wantErr)
			continue
		}
		if gotErr == nil && got.Args != want.Args {
			t.Errorf("%s: args %+v, want %+v", in, got.Args, want.Args)
		}
	}
}
