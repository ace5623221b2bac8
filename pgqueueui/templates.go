package pgqueueui

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/limitspec"
)

// pages are the templates besides the layout, one file each.
var pages = []string{"overview", "queue", "jobs", "job", "confirm", "locks", "periodic", "error", "workflow", "workflows"}

var funcs = template.FuncMap{
	"ts":     formatTime,
	"dur":    formatDuration,
	"clip":   clip,
	"limits": limitsSummary,
	"rate":   func(r pgqueue.Rate) string { return limitspec.FormatRate(r.Limit, r.Period) },
	"period": limitspec.FormatPeriod,
	"partitionBy": func(p pgqueue.PartitionBy) string {
		return limitspec.FormatPartitionBy(p.Kind, p.ArgsFields)
	},
}

// limitsSummary is a queue's limits on one line, "" for none.
func limitsSummary(l pgqueue.QueueLimits) string {
	var items []string
	if l.MaxRunning > 0 {
		items = append(items, fmt.Sprintf("max %d running", l.MaxRunning))
	}
	if l.MaxRunningPerKey > 0 {
		items = append(items, fmt.Sprintf("max %d per key", l.MaxRunningPerKey))
	}
	if l.Rate.Limit > 0 {
		r := limitspec.FormatRate(l.Rate.Limit, l.Rate.Period)
		if l.Rate.PerKey {
			r += " per key"
		}
		items = append(items, r)
	}
	if by := limitspec.FormatPartitionBy(l.PartitionBy.Kind, l.PartitionBy.ArgsFields); by != "" {
		items = append(items, "key "+by)
	}
	if l.SequenceContinue {
		items = append(items, "sequences continue")
	}
	return strings.Join(items, " · ")
}

// clip shortens stored JSON for a list: args can be megabytes; the job's
// page shows them whole.
func clip(b []byte, n int) string {
	r := []rune(string(b))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n]) + "…"
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// formatDuration rounds a duration for people: 3.2s, 4m12s, 2h3m.
func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d < 0 && d > -time.Second, d > 0 && d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 0 && d > -time.Minute, d > 0 && d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// parseTemplates pairs the layout with each page.
func parseTemplates() (map[string]*template.Template, error) {
	out := make(map[string]*template.Template, len(pages))
	for _, name := range pages {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("pgqueueui: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}
