// Package testlog gives tests their loggers: one that drops everything and
// one that keeps what was logged for the test to read.
package testlog

import (
	"bytes"
	"log/slog"
	"sync"
)

// Discard returns a logger that drops every record.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Buffer keeps the text of every record logged through Logger. It is safe
// for concurrent writers.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Logger returns a text logger that writes records of level Info and up
// to b.
func (b *Buffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, nil))
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything logged so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
