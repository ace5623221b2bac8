package pgqueueui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueueui"
)

// limitsOf returns the limits QueueList shows for queue; zero when it is
// not listed.
func (e *env) limitsOf(queue string) pgqueue.QueueLimits {
	e.t.Helper()
	qs, err := e.client.QueueList(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == queue {
			return q.Limits
		}
	}
	return pgqueue.QueueLimits{}
}

// heldRow is the held-back table's row of what, with its count.
func heldRow(what string, n int64) string {
	return fmt.Sprintf(`data-held="%s"><td>`, what) + "%s" + fmt.Sprintf(`</td><td class="n">%d</td>`, n)
}

// TestQueuePage: a queue's page shows its limits and, with a client
// obeying them, how many jobs they hold back and by which limit; the
// overview shows each queue's limits and links to the page.
func TestQueuePage(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the queue page")
	e := newEnv(t, nil)
	ctx := t.Context()
	if err := e.client.QueueSetLimits(ctx, "flow", pgqueue.QueueLimits{MaxRunning: 10, MaxRunningPerKey: 1,
		PartitionBy: pgqueue.PartitionBy{ArgsFields: []string{"to"}}}); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, to := range []string{"a", "a", "a", "b", "s", "s"} {
		ids = append(ids, e.enqueue(emailArgs{To: to}, &pgqueue.EnqueueOpts{Queue: "flow"}))
	}
	// The last two are one sequence: EnqueueOpts has no SequenceKey yet.
	if _, err := e.pool.Exec(ctx, `UPDATE pgqueue.jobs SET sequence_key = 'seq' WHERE id = ANY ($1)`, ids[4:]); err != nil {
		t.Fatal(err)
	}
	started := make(chan int64, len(ids))
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[emailArgs]) error {
		started <- job.ID
		<-ctx.Done()
		return context.Cause(ctx)
	}, nil); err != nil {
		t.Fatal(err)
	}
	worker, err := pgqueue.New(e.pool, &pgqueue.Config{Workers: workers, Queues: map[string]pgqueue.QueueConfig{"flow": {MaxWorkers: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		worker.Stop(stopCtx)
	})
	for range 3 { // a, b and the sequence's first: one per key
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the limited queue's jobs did not start")
		}
	}

	status, body := e.get("/queue/flow")
	if status != http.StatusOK {
		t.Fatalf("queue page: %d\n%s", status, body)
	}
	mustContain(t, "queue page", body, `data-queue="flow"`, `href="/jobs?queue=flow"`, "0 scheduled, 3 available, 3 running",
		`id="limit-max-running">10 at once`, `id="limit-max-running-per-key">1 per partition key`, `id="limit-rate">—`,
		`id="limit-partition-by"><code>args.to</code>`, "holds its sequence until retried or deleted",
		fmt.Sprintf(heldRow("in-sequence", 1), "waiting for an earlier job of their sequence"),
		fmt.Sprintf(heldRow("by-key-limit", 2), "their partition key is at its max running"),
		fmt.Sprintf(heldRow("by-key-rate", 0), "their partition key used its rate"),
		fmt.Sprintf(heldRow("ready", 0), "ready"),
		"3 running of at most 10; 3 partition keys at their max running.",
		// The form, filled with what is stored.
		`action="/queue/flow/limits"`, `name="csrf"`, `id="l-max-running" value="10"`, `id="l-max-running-per-key" value="1"`,
		`id="l-partition-by" value="args.to"`, `id="l-rate" value=""`)
	mustNotContain(t, "queue page", body, `id="l-rate-per-key" value="on" checked`, `id="error"`)
	select {
	case id := <-started:
		t.Fatalf("job %d started past the limit", id)
	default:
	}

	// The overview: a limits column linking to the page.
	e.enqueue(emailArgs{To: "x"}, &pgqueue.EnqueueOpts{Queue: "plain"})
	_, body = e.get("/")
	mustContain(t, "overview", body, `<a class="limits" href="/queue/flow">max 10 running · max 1 per key · key args.to</a>`,
		`<a class="limits" href="/queue/plain">none</a>`)
	// The fragment too: it replaces the table.
	_, body = e.get("/fragment/overview")
	mustContain(t, "fragment", body, `href="/queue/flow">max 10 running`)

	// A queue without limits or sequences holds nothing back.
	_, body = e.get("/queue/plain")
	mustContain(t, "plain queue", body, `id="no-limits"`, `id="no-held"`, `id="l-max-running" value=""`)
	mustNotContain(t, "plain queue", body, `id="held"`)
	// One with nothing at all can still be limited.
	if status, body := e.get("/queue/later"); status != http.StatusOK || !strings.Contains(body, `action="/queue/later/limits"`) {
		t.Errorf("empty queue: %d\n%s", status, body)
	}
	if status, _ := e.get("/queue/" + url.PathEscape("Bad Name")); status != http.StatusNotFound {
		t.Errorf("invalid queue name: %d, want 404", status)
	}
}

// TestLimitsForm sets, refuses and removes limits through the queue page's
// form.
func TestLimitsForm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.enqueue(emailArgs{To: "x"}, &pgqueue.EnqueueOpts{Queue: "email"})
	token := e.confirm("/queue/email").Get("csrf")
	post := func(fields url.Values) (*http.Response, string) {
		t.Helper()
		form := url.Values{"csrf": {token}}
		for k, v := range fields {
			form[k] = v
		}
		return e.post("/queue/email/limits", form)
	}

	resp, _ := post(url.Values{"max_running": {"5"}, "max_running_per_key": {" 2 "}, "rate": {"10/1m"}, "rate_per_key": {"on"},
		"partition_by": {"kind, args.to"}, "sequence_continue": {"on"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/queue/email?done=limits" {
		t.Fatalf("save: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	want := pgqueue.QueueLimits{MaxRunning: 5, MaxRunningPerKey: 2, Rate: pgqueue.Rate{Limit: 10, Period: time.Minute, PerKey: true},
		PartitionBy: pgqueue.PartitionBy{Kind: true, ArgsFields: []string{"to"}}, SequenceContinue: true}
	if got := e.limitsOf("email"); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("stored %+v, want %+v", got, want)
	}
	_, body := e.get("/queue/email?done=limits")
	mustContain(t, "after save", body, `id="done">The queue&#39;s limits were saved`, `id="l-max-running" value="5"`,
		`id="l-rate" value="10/1m"`, `id="l-rate-per-key" value="on" checked`, `id="l-partition-by" value="kind,args.to"`,
		`id="l-sequence-continue" value="on" checked`, `id="limit-rate">10 starts within any 1m, per partition key`,
		"a discarded or cancelled job releases the next one")

	// Refused input: 400, the reason and what was typed, nothing stored.
	for _, tc := range []struct {
		fields url.Values
		want   string
	}{
		{url.Values{"max_running": {"0"}}, "Max running must be a whole number of at least 1"},
		{url.Values{"max_running_per_key": {"two"}}, "Max running per key must be a whole number"},
		{url.Values{"rate": {"100"}}, "not LIMIT/PERIOD"},
		{url.Values{"rate": {"5/1us"}}, "under a millisecond"},
		{url.Values{"rate_per_key": {"on"}}, "per key needs a rate"},
		{url.Values{"partition_by": {"customer"}}, "neither kind nor args.FIELD"},
		{url.Values{"partition_by": {"args.a,args.b,args.c,args.d,args.e"}}, "at most 4"},
	} {
		resp, body := post(tc.fields)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%v: %d, want 400", tc.fields, resp.StatusCode)
		}
		mustContain(t, fmt.Sprint(tc.fields), body, `id="error">`, tc.want, `id="limits-form"`)
		for k, v := range tc.fields {
			if k != "rate_per_key" {
				mustContain(t, fmt.Sprint(tc.fields), body, fmt.Sprintf(`name="%s" id="l-%s" value="%s"`, k, strings.ReplaceAll(k, "_", "-"), v[0]))
			}
		}
	}
	if got := e.limitsOf("email"); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("a refused form changed the limits: %+v", got)
	}

	// Without the token, or cross-site: 403, nothing stored.
	if resp, body := e.post("/queue/email/limits", url.Values{"clear": {"1"}}); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, e.base+"/queue/email/limits", strings.NewReader(url.Values{"csrf": {token}, "clear": {"1"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := e.read(resp); status != http.StatusForbidden {
		t.Errorf("cross-site: %d", status)
	}
	if e.limitsOf("email").IsZero() {
		t.Fatal("a refused request removed the limits")
	}
	// Only POST acts.
	if status, _ := e.get("/queue/email/limits"); status != http.StatusMethodNotAllowed {
		t.Errorf("GET of the form's action: %d, want 405", status)
	}

	// The form states the whole limits: fields left empty are none.
	if resp, _ := post(url.Values{"max_running": {"3"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save max running only: %d", resp.StatusCode)
	}
	if got := e.limitsOf("email"); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", pgqueue.QueueLimits{MaxRunning: 3}) {
		t.Fatalf("stored %+v, want max running 3 alone", got)
	}
	// "Remove all limits" ignores the fields.
	if resp, _ := post(url.Values{"clear": {"1"}, "max_running": {"7"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove: %d", resp.StatusCode)
	}
	if got := e.limitsOf("email"); !got.IsZero() {
		t.Fatalf("after remove: %+v", got)
	}
	// An invalid queue name is refused.
	if resp, _ := e.post("/queue/"+url.PathEscape("Bad Name")+"/limits", url.Values{"csrf": {token}, "max_running": {"1"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("invalid queue name: %d, want 400", resp.StatusCode)
	}
}

func TestLimitsReadOnly(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the limits forms hidden in read-only mode")
	secret := []byte(strings.Repeat("k", 32))
	e := newEnv(t, &pgqueueui.Options{ReadOnly: true, Secret: secret})
	e.enqueue(emailArgs{To: "x"}, &pgqueue.EnqueueOpts{Queue: "email"})
	if err := e.client.QueueSetLimits(t.Context(), "email", pgqueue.QueueLimits{MaxRunning: 2}); err != nil {
		t.Fatal(err)
	}
	status, body := e.get("/queue/email")
	if status != http.StatusOK {
		t.Fatalf("queue page: %d", status)
	}
	mustContain(t, "read-only queue page", body, `id="limit-max-running">2 at once`, `data-held="ready"`)
	mustNotContain(t, "read-only queue page", body, "<form", "csrf", "Change the limits")

	// A writable handler's token with the same secret does not help.
	w := newEnv(t, &pgqueueui.Options{Secret: secret})
	form := w.confirm("/queue/email")
	u, _ := url.Parse(w.base)
	e.http.Jar.SetCookies(u, w.http.Jar.Cookies(u))
	form.Set("clear", "1")
	if resp, body := e.post("/queue/email/limits", form); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Errorf("POST: %d, want 403", resp.StatusCode)
	}
	if got := e.limitsOf("email"); got.MaxRunning != 2 {
		t.Fatalf("read-only handler changed the limits: %+v", got)
	}
}

// TestLimitsEscaped: an args field name is data: markup in it is text on
// the queue page, in its form and on the overview.
func TestLimitsEscaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	if err := e.client.QueueSetLimits(t.Context(), "email", pgqueue.QueueLimits{
		PartitionBy: pgqueue.PartitionBy{ArgsFields: []string{hostileImg}}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/queue/email"} {
		_, body := e.get(p)
		mustContain(t, p, body, "args.&#34;&gt;&lt;img src=x onerror=")
		mustNotContain(t, p, body, "<img", `onerror="document`)
	}
}
