package otelpgqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"

	"github.com/pgqueue/pgqueue"
)

// The choice of which inserts and attempts reach the tracer (see
// Config.SpanRatio) is made here, before the SDK: its Start costs an
// attempt about 4 µs even when its sampler drops the span (IDs from a
// locked generator, a context, and deep calls that grow the executor's
// stack), a third of the client's CPU per job.

// offerInsert reports whether an insert in ctx gets a span.
func (in *Instrumentation) offerInsert(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	switch {
	case sc.IsSampled() || in.all:
		return true
	case sc.IsValid():
		return in.chosen(traceIDHash(sc.TraceID()))
	default:
		return in.chosen(rand.Uint64()) // per-P generator: no lock, no allocation
	}
}

// offerAttempt reports whether an attempt of job gets a span and, when
// its enqueuer was sampled, the enqueuer's span context, its parent.
//
//go:noinline
func (in *Instrumentation) offerAttempt(job *pgqueue.JobRow) (trace.SpanContext, bool) {
	at := bytes.Index(job.Meta, metaKeyQuoted)
	if at < 0 {
		return trace.SpanContext{}, in.chosen(mix64(uint64(job.ID)))
	}
	if low, sampled, ok := scanTraceparent(job.Meta[at:]); ok && !sampled {
		return trace.SpanContext{}, in.chosen(low)
	}
	// Sampled, or stored by another propagator: the full extraction
	// (which allocates) for a span that is going to cost far more.
	sc, ok := in.enqueuer(job.Meta)
	switch {
	case !ok:
		return trace.SpanContext{}, in.chosen(mix64(uint64(job.ID)))
	case sc.IsSampled():
		return sc, true
	default:
		return trace.SpanContext{}, in.chosen(traceIDHash(sc.TraceID()))
	}
}

// chosen reports whether a span with no sampled parent whose hash is h
// is offered to the tracer: the same test as the SDK's
// TraceIDRatioBased, so that a trace id gets the same answer from both.
func (in *Instrumentation) chosen(h uint64) bool {
	return in.all || h>>1 < in.threshold
}

var (
	metaKeyQuoted     = []byte(`"` + MetaKey + `"`)
	traceparentQuoted = []byte(`"traceparent"`)
)

// scanTraceparent finds the W3C traceparent stored after the MetaKey in
// meta (JSON, as PostgreSQL's jsonb prints it or as written) and returns
// the low 64 bits of its trace id, as TraceIDRatioBased reads them, and
// its sampled flag; ok is false when there is none, or it is malformed.
func scanTraceparent(meta []byte) (low uint64, sampled, ok bool) {
	at := bytes.Index(meta, traceparentQuoted)
	if at < 0 {
		return 0, false, false
	}
	rest := skipSpace(meta[at+len(traceparentQuoted):])
	if len(rest) == 0 || rest[0] != ':' {
		return 0, false, false
	}
	rest = skipSpace(rest[1:])
	// "vv-<32 hex trace id>-<16 hex span id>-ff"
	const n = 1 + 2 + 1 + 32 + 1 + 16 + 1 + 2
	if len(rest) < n+1 || rest[0] != '"' || rest[n] != '"' || rest[3] != '-' || rest[36] != '-' || rest[53] != '-' {
		return 0, false, false
	}
	low, ok = hexUint64(rest[20:36]) // the trace id's second half
	if !ok {
		return 0, false, false
	}
	flags, ok := hexUint64(rest[54:56])
	if !ok {
		return 0, false, false
	}
	return low, flags&uint64(trace.FlagsSampled) != 0, true
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// hexUint64 parses up to 16 lowercase or uppercase hex digits.
func hexUint64(b []byte) (uint64, bool) {
	var v uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}

// traceIDHash is what TraceIDRatioBased compares: the trace id's second
// half.
func traceIDHash(id trace.TraceID) uint64 {
	return binary.BigEndian.Uint64(id[8:16])
}

// mix64 spreads a job id (consecutive numbers) over 64 bits: the
// finalizer of splitmix64.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
