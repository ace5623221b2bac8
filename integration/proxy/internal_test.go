package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
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
		if got := isCommit(tt.query); got != tt.want {
			t.Errorf("isCommit(%q) = %v, want %v", tt.query, got, tt.want)
		}
	}
}

// chunkedReader hands out its chunks as the client's reads: a read never
// returns bytes of two chunks, as if each chunk arrived on its own.
type chunkedReader struct{ chunks [][]byte }

func (r *chunkedReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if r.chunks[0] = r.chunks[0][n:]; len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// writeRecorder keeps each write to the server apart.
type writeRecorder struct{ writes [][]byte }

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

// encode encodes msgs one after the other.
func encode(t *testing.T, msgs ...pgproto3.Message) []byte {
	t.Helper()
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			t.Fatalf("encode %T: %v", m, err)
		}
	}
	return b
}

// drain reads c's messages after the startup phase until the stream ends,
// and returns them as their type names and the error that ended them.
func drain(c *clientReader) ([]string, error) {
	var got []string
	for {
		msg, err := c.next()
		if err != nil {
			return got, err
		}
		name := typeName(msg)
		if q, ok := msg.(*pgproto3.Query); ok && isCommit(q.String) {
			name += "(commit)"
		}
		got = append(got, name)
		if err := c.send(msg); err != nil {
			return got, err
		}
	}
}

func typeName(msg pgproto3.FrontendMessage) string {
	switch msg.(type) {
	case *pgproto3.Query:
		return "Query"
	case *pgproto3.GSSResponse:
		return "GSSResponse"
	case *pgproto3.Parse:
		return "Parse"
	case *pgproto3.Bind:
		return "Bind"
	case *pgproto3.Describe:
		return "Describe"
	case *pgproto3.Execute:
		return "Execute"
	case *pgproto3.Sync:
		return "Sync"
	case *pgproto3.CopyData:
		return "CopyData"
	case *pgproto3.CopyDone:
		return "CopyDone"
	case *pgproto3.Terminate:
		return "Terminate"
	}
	return "other"
}

func TestClientReader(t *testing.T) {
	t.Parallel()

	startup := &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "x"}}

	t.Run("ForwardsMessagesUnchangedInTheBatchesTheyCame", func(t *testing.T) {
		t.Parallel()
		// What a client sends, one chunk per arrival: encryption refused,
		// the startup message, a SASL exchange, an extended-protocol
		// query, a COMMIT, a COPY split across two arrivals, the end.
		extended := encode(t, &pgproto3.Parse{Name: "s1", Query: "SELECT $1::int", ParameterOIDs: []uint32{23}},
			&pgproto3.Bind{PreparedStatement: "s1", ParameterFormatCodes: []int16{1}, Parameters: [][]byte{{0, 0, 0, 7}, nil}, ResultFormatCodes: []int16{1}},
			&pgproto3.Describe{ObjectType: 'P'}, &pgproto3.Execute{MaxRows: 0}, &pgproto3.Sync{})
		copyIn := encode(t, &pgproto3.CopyData{Data: bytes.Repeat([]byte("row\n"), 100)}, &pgproto3.CopyDone{})
		want := [][]byte{
			encode(t, startup),
			encode(t, &pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=nonce")}),
			encode(t, &pgproto3.SASLResponse{Data: []byte("c=biws,r=nonce,p=proof")}),
			extended,
			encode(t, &pgproto3.Query{String: " Commit ;"}),
			copyIn,
			encode(t, &pgproto3.Terminate{}),
		}
		in := &chunkedReader{chunks: [][]byte{encode(t, &pgproto3.SSLRequest{})}}
		for _, w := range want {
			if bytes.Equal(w, copyIn) {
				// Arrives in two parts, the first ending mid-message.
				in.chunks = append(in.chunks, slices.Clone(w[:100]), slices.Clone(w[100:]))
				continue
			}
			in.chunks = append(in.chunks, slices.Clone(w))
		}
		server := &writeRecorder{}
		c := newClientReader(in, server)

		refused := 0
		cancel, err := c.startup(func() error { refused++; return nil })
		if err != nil || cancel {
			t.Fatalf("startup = cancel %v, %v", cancel, err)
		}
		if refused != 1 {
			t.Fatalf("SSLRequest refused %d times, want 1", refused)
		}
		got, err := drain(c)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("stream ended with %v, want io.ErrUnexpectedEOF", err)
		}
		wantTypes := []string{"GSSResponse", "GSSResponse", "Parse", "Bind", "Describe", "Execute", "Sync", "Query(commit)", "CopyData", "CopyDone", "Terminate"}
		if !slices.Equal(got, wantTypes) {
			t.Fatalf("messages = %v, want %v", got, wantTypes)
		}
		if len(server.writes) != len(want) {
			t.Fatalf("%d writes to the server, want %d: %q", len(server.writes), len(want), server.writes)
		}
		for i := range want {
			if !bytes.Equal(server.writes[i], want[i]) {
				t.Errorf("write %d = %q, want %q", i, server.writes[i], want[i])
			}
		}
	})

	t.Run("KeepsStartupParameters", func(t *testing.T) {
		t.Parallel()
		params := map[string]string{"user": "u", "database": "d", "application_name": "a b", "options": "-c x=1"}
		sent := &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: params}
		server := &writeRecorder{}
		c := newClientReader(bytes.NewReader(encode(t, sent)), server)
		if cancel, err := c.startup(nil); err != nil || cancel {
			t.Fatalf("startup = cancel %v, %v", cancel, err)
		}
		if len(server.writes) != 1 {
			t.Fatalf("%d writes to the server, want 1", len(server.writes))
		}
		// Their order may change; nothing else.
		msg, err := pgproto3.NewBackend(bytes.NewReader(server.writes[0]), nil).ReceiveStartupMessage()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := msg.(*pgproto3.StartupMessage)
		if !ok || got.ProtocolVersion != sent.ProtocolVersion || len(got.Parameters) != len(params) {
			t.Fatalf("server got %#v, want %#v", msg, sent)
		}
		for k, v := range params {
			if got.Parameters[k] != v {
				t.Errorf("parameter %s = %q, want %q", k, got.Parameters[k], v)
			}
		}
	})

	t.Run("RefusesGSSEncryption", func(t *testing.T) {
		t.Parallel()
		server := &writeRecorder{}
		c := newClientReader(bytes.NewReader(encode(t, &pgproto3.GSSEncRequest{}, &pgproto3.SSLRequest{}, startup)), server)
		refused := 0
		if cancel, err := c.startup(func() error { refused++; return nil }); err != nil || cancel {
			t.Fatalf("startup = cancel %v, %v", cancel, err)
		}
		if refused != 2 || len(server.writes) != 1 || !bytes.Equal(server.writes[0], encode(t, startup)) {
			t.Fatalf("refused %d, server got %q; want 2 refusals and the startup message", refused, server.writes)
		}
	})

	t.Run("RefusalErrorEndsStartup", func(t *testing.T) {
		t.Parallel()
		c := newClientReader(bytes.NewReader(encode(t, &pgproto3.SSLRequest{}, startup)), &writeRecorder{})
		boom := errors.New("client gone")
		if _, err := c.startup(func() error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("startup = %v, want %v", err, boom)
		}
	})

	t.Run("ForwardsCancelRequest", func(t *testing.T) {
		t.Parallel()
		req := encode(t, &pgproto3.CancelRequest{ProcessID: 42, SecretKey: []byte{1, 2, 3, 4}})
		server := &writeRecorder{}
		c := newClientReader(bytes.NewReader(req), server)
		cancel, err := c.startup(nil)
		if err != nil || !cancel {
			t.Fatalf("startup = cancel %v, %v; want a cancel request", cancel, err)
		}
		if len(server.writes) != 1 || !bytes.Equal(server.writes[0], req) {
			t.Fatalf("server got %q, want %q", server.writes, req)
		}
	})

	t.Run("WritesFullBatchAtOnce", func(t *testing.T) {
		t.Parallel()
		big := encode(t, &pgproto3.CopyData{Data: make([]byte, batchSize)})
		sync := encode(t, &pgproto3.Sync{})
		server := &writeRecorder{}
		c := newClientReader(bytes.NewReader(append(slices.Clone(big), sync...)), server)
		if _, err := drain(c); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("stream ended with %v", err)
		}
		if len(server.writes) != 2 || !bytes.Equal(server.writes[0], big) || !bytes.Equal(server.writes[1], sync) {
			t.Fatalf("writes of %d bytes, want %d then %d", lens(server.writes), len(big), len(sync))
		}
	})

	t.Run("RejectsBadLengths", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			name    string
			stream  []byte
			startup bool
		}{
			{"StartupShorterThanItsCode", binary.BigEndian.AppendUint32(nil, 7), true},
			{"StartupLongerThanPostgreSQLAllows", binary.BigEndian.AppendUint32(nil, 20000), true},
			{"MessageShorterThanItsLength", []byte{'Q', 0, 0, 0, 2}, false},
			{"MessageLongerThanMaxMessage", binary.BigEndian.AppendUint32([]byte{'d'}, maxMessage+1), false},
			{"UnknownMessageType", []byte{'?', 0, 0, 0, 4}, false},
			{"TruncatedMessage", []byte{'Q', 0, 0, 0, 9, 'S', 'E', 0}, false},
		} {
			server := &writeRecorder{}
			c := newClientReader(bytes.NewReader(tt.stream), server)
			var err error
			if tt.startup {
				_, err = c.startup(nil)
			} else {
				_, err = drain(c)
			}
			if err == nil || errors.Is(err, io.EOF) {
				t.Errorf("%s: read ended with %v, want an error about the stream", tt.name, err)
			}
			if len(server.writes) != 0 {
				t.Errorf("%s: forwarded %q", tt.name, server.writes)
			}
			var tooLong *pgproto3.ExceededMaxBodyLenErr
			if tt.name == "MessageLongerThanMaxMessage" && !errors.As(err, &tooLong) {
				t.Errorf("%s: read ended with %v, want pgproto3.ExceededMaxBodyLenErr", tt.name, err)
			}
		}
	})
}

func lens(bs [][]byte) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = len(b)
	}
	return out
}
