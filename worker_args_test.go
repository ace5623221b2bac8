package pgqueue

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
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
