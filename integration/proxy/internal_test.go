package proxy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"
)

func TestIsCommit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		query string
		want  bool
	}{
		{"commit", true},
		{"COMMIT", true},
		{"  Commit ; ", true},
		{"commit;", true},
		{"end", true},
		{"COMMIT WORK", true},
		{"commit transaction;", true},
		{"", false},
		{"rollback", false},
		{"select 'commit'", false},
		{"commit; select 1", false},
		{"commit prepared 'x'", false},
	} {
		body := append([]byte(tt.query), 0)
		if got := isCommit(body); got != tt.want {
			t.Errorf("isCommit(%q) = %v, want %v", tt.query, got, tt.want)
		}
	}
}

func TestMsgReader(t *testing.T) {
	t.Parallel()
	var stream bytes.Buffer
	// A startup message, then a Query and a Terminate.
	startup := []byte{0, 3, 0, 0, 'u', 's', 'e', 'r', 0, 'x', 0, 0}
	stream.Write(binary.BigEndian.AppendUint32(nil, uint32(4+len(startup))))
	stream.Write(startup)
	query := []byte("SELECT 1\x00")
	stream.WriteByte('Q')
	stream.Write(binary.BigEndian.AppendUint32(nil, uint32(4+len(query))))
	stream.Write(query)
	stream.Write([]byte{'X', 0, 0, 0, 4})

	r := &msgReader{r: bufio.NewReader(&stream)}
	msg, err := r.untyped()
	if err != nil || len(msg) != 4+len(startup) || !bytes.Equal(msg[4:], startup) {
		t.Fatalf("startup = %q, %v", msg, err)
	}
	msg, err = r.typed()
	if err != nil || msg[0] != 'Q' || !bytes.Equal(msg[5:], query) {
		t.Fatalf("query = %q, %v", msg, err)
	}
	msg, err = r.typed()
	if err != nil || !bytes.Equal(msg, []byte{'X', 0, 0, 0, 4}) {
		t.Fatalf("terminate = %q, %v", msg, err)
	}
	if _, err := r.typed(); err == nil {
		t.Fatal("read past the end succeeded")
	}

	bad := &msgReader{r: bufio.NewReader(bytes.NewReader([]byte{'Q', 0, 0, 0, 2}))}
	if _, err := bad.typed(); err == nil {
		t.Fatal("length 2 accepted")
	}
}
