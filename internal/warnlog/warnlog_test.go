package warnlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Not parallel: it swaps slog.Default.
func TestDefaultPassesWarningsOnly(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	log := Default().With("client", "c1").WithGroup("g")
	log.Debug("debug")
	log.Info("info")
	log.Warn("warn", "k", 1)
	log.Error("error")

	got := buf.String()
	for _, dropped := range []string{"msg=debug", "msg=info"} {
		if strings.Contains(got, dropped) {
			t.Errorf("%s written:\n%s", dropped, got)
		}
	}
	for _, kept := range []string{"level=WARN msg=warn client=c1 g.k=1", "level=ERROR msg=error client=c1"} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q missing:\n%s", kept, got)
		}
	}
}
