package pgqueueui_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pglock"
	"github.com/pgqueue/pgqueue/pgqueuetest"
	"github.com/pgqueue/pgqueue/pgqueueui"
)

func TestMain(m *testing.M) { os.Exit(pgqueuetest.Main(m, nil)) }

type emailArgs struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

func (emailArgs) Kind() string { return "send_email" }

type reportArgs struct {
	N int `json:"n"`
}

func (reportArgs) Kind() string { return "report" }

// hostileKindArgs is a job whose kind is markup.
type hostileKindArgs struct{}

func (hostileKindArgs) Kind() string { return "<img src=x onerror=alert(1)>" }

// hostile is the markup a job's args must show as text.
const (
	hostileScript = `<script>document.title="pwned"</script>`
	hostileImg    = `"><img src=x onerror="document.title='pwned'">`
)

// env is a dashboard on a database of the test's own, behind a real
// server, with a browser-like client (cookies kept, redirects not
// followed).
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	client *pgqueue.Client
	srv    *httptest.Server
	http   *http.Client
	base   string // the server's URL plus the prefix
}

func newEnv(t *testing.T, opts *pgqueueui.Options) *env {
	t.Helper()
	pool := pgqueuetest.NewPool(t)
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := pgqueueui.New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	var handler http.Handler = h
	prefix := ""
	if opts != nil && opts.Prefix != "" {
		prefix = opts.Prefix
		mux := http.NewServeMux()
		mux.Handle(prefix+"/", h)
		mux.Handle(prefix, h)
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "the app's own page", http.StatusTeapot) })
		handler = mux
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &env{t: t, pool: pool, client: client, srv: srv, http: hc, base: srv.URL + prefix}
}

// get fetches path below the prefix and returns the status and body.
func (e *env) get(path string) (int, string) {
	e.t.Helper()
	resp, err := e.http.Get(e.base + path)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.read(resp)
}

func (e *env) read(resp *http.Response) (int, string) {
	e.t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); csp != pgqueueui.ContentSecurityPolicy {
		e.t.Errorf("%s: Content-Security-Policy %q", resp.Request.URL, csp)
	}
	return resp.StatusCode, string(b)
}

func (e *env) post(path string, form url.Values) (*http.Response, string) {
	e.t.Helper()
	resp, err := e.http.PostForm(e.base+path, form)
	if err != nil {
		e.t.Fatal(err)
	}
	_, body := e.read(resp)
	return resp, body
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// confirm opens the confirmation page of action (GET, which must change
// nothing) and returns its form's fields.
func (e *env) confirm(path string) url.Values {
	e.t.Helper()
	status, body := e.get(path)
	if status != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, status, body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		e.t.Fatalf("GET %s: no CSRF token in\n%s", path, body)
	}
	form := url.Values{"csrf": {m[1]}}
	if n := regexp.MustCompile(`name="name" value="([^"]*)"`).FindStringSubmatch(body); n != nil {
		form.Set("name", htmlUnescape(n[1]))
	}
	return form
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&quot;", `"`, "&lt;", "<", "&gt;", ">", "&#39;", "'", "&amp;", "&").Replace(s)
}

func (e *env) enqueue(args pgqueue.JobArgs, opts *pgqueue.EnqueueOpts) int64 {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), args, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.ID
}

func (e *env) state(id int64) pgqueue.JobState {
	e.t.Helper()
	j, err := e.client.JobGet(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j.State
}

func mustContain(t *testing.T, what, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(body, s) {
			t.Errorf("%s: missing %q in\n%s", what, s, body)
		}
	}
}

func mustNotContain(t *testing.T, what, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(body, s) {
			t.Errorf("%s: unexpected %q in\n%s", what, s, body)
		}
	}
}

func TestOverview(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.enqueue(emailArgs{To: "a@example.com"}, &pgqueue.EnqueueOpts{Queue: "email"})
	e.enqueue(emailArgs{To: "b@example.com"}, &pgqueue.EnqueueOpts{Queue: "email"})
	e.enqueue(reportArgs{N: 1}, &pgqueue.EnqueueOpts{Queue: "reports", RunAt: time.Now().Add(time.Hour)})
	done := e.enqueue(reportArgs{N: 2}, &pgqueue.EnqueueOpts{Queue: "reports"})
	if _, err := e.client.JobCancel(t.Context(), done); err != nil {
		t.Fatal(err)
	}

	status, body := e.get("/")
	if status != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", status, body)
	}
	mustContain(t, "overview", body,
		`<tr data-queue="email">`, `href="/jobs?queue=email"`, `<td class="n">0</td><td class="n">0</td><td class="n">2</td><td class="n">0</td>`,
		`<tr data-queue="reports">`, `<td class="n">0</td><td class="n">1</td><td class="n">0</td><td class="n">0</td>`,
		`href="/queues/pause?name=email"`, `data-refresh="/fragment/overview"`, `src="/static/app.js"`,
		// The cancelled job finished this minute.
		`1 jobs finished in the last 60 minutes`,
		"No client has led maintenance")
	if n := strings.Count(body, "<rect "); n != 60 {
		t.Errorf("throughput chart has %d bars, want 60", n)
	}

	status, frag := e.get("/fragment/overview")
	if status != http.StatusOK || strings.Contains(frag, "<html") || !strings.Contains(frag, `<tr data-queue="email">`) {
		t.Errorf("fragment: %d\n%s", status, frag)
	}
	status, js := e.get("/static/app.js")
	if status != http.StatusOK || !strings.Contains(js, "data-refresh") {
		t.Errorf("app.js: %d", status)
	}
	if status, _ := e.get("/static/style.css"); status != http.StatusOK {
		t.Errorf("style.css: %d", status)
	}
	if status, _ := e.get("/nope"); status != http.StatusNotFound {
		t.Errorf("unknown page: %d, want 404", status)
	}
}

// TestOverviewShowsLeader runs a real client: the overview names it as the
// maintenance leader (so pgqueueui's lease name matches the client's), and
// the periodic page lists its periodic job once the leader ran it.
func TestOverviewShowsLeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(context.Context, *pgqueue.Job[reportArgs]) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	worker, err := pgqueue.New(e.pool, &pgqueue.Config{
		Queues: map[string]pgqueue.QueueConfig{"reports": {MaxWorkers: 1}}, Workers: workers,
		PeriodicJobs: []*pgqueue.PeriodicJob{pgqueue.NewPeriodicJob("nightly <report>", pgqueue.EverySchedule(time.Hour),
			func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) {
				return reportArgs{N: 9}, &pgqueue.EnqueueOpts{Queue: "reports"}
			},
			&pgqueue.PeriodicJobOpts{RunOnStart: true})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Stop(context.Background()) })

	// Wait for the election and the first periodic run: bounded, and
	// checked through the pages themselves.
	deadline := time.Now().Add(15 * time.Second)
	var overview, periodic string
	for {
		_, overview = e.get("/fragment/overview")
		_, periodic = e.get("/periodic")
		if strings.Contains(overview, worker.ID()) && strings.Contains(periodic, "nightly &lt;report&gt;") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader %s or periodic job not shown:\n%s\n%s", worker.ID(), overview, periodic)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustContain(t, "overview", overview, " leads (fence ")
	mustContain(t, "periodic", periodic, "<code>@every 1h0m0s</code>")
	status, locks := e.get("/locks")
	if status != http.StatusOK {
		t.Fatalf("locks: %d", status)
	}
	mustContain(t, "locks", locks, "pgqueue:maintenance <span class=\"badge\">maintenance leader</span>", worker.ID())
}

func TestLocksPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	status, body := e.get("/locks")
	if status != http.StatusOK {
		t.Fatalf("locks: %d", status)
	}
	mustContain(t, "empty locks", body, `id="no-leases"`, `id="no-advisory"`)

	locker, err := pglock.New(e.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := locker.TryLockLease(t.Context(), "billing:<run>", "host-1 <b>", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	session, err := locker.LockSession(t.Context(), "reindex", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Release(context.Background())

	_, body = e.get("/locks")
	key := locker.Key("reindex")
	mustContain(t, "locks", body, "billing:&lt;run&gt;", "host-1 &lt;b&gt;",
		fmt.Sprintf("(%d, %d)", uint32(key.Class), uint32(key.Object)), "ExclusiveLock", "<td>held</td>")
	mustNotContain(t, "locks", body, "<b>", `id="no-advisory"`)
}

func TestJobsFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	a := e.enqueue(emailArgs{To: "alice@example.com"}, &pgqueue.EnqueueOpts{Queue: "email", Tags: []string{"urgent", "vip"}})
	b := e.enqueue(emailArgs{To: "bob@example.com"}, &pgqueue.EnqueueOpts{Queue: "email", Tags: []string{"urgent"}})
	c := e.enqueue(reportArgs{N: 7}, &pgqueue.EnqueueOpts{Queue: "reports"})
	if _, err := e.client.JobCancel(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	rowOf := func(id int64) string { return fmt.Sprintf(`<tr data-id="%d"`, id) }

	cases := []struct {
		query    string
		want     []int64
		wantNone []int64
	}{
		{"", []int64{a, b, c}, nil},
		{"?queue=email", []int64{a, b}, []int64{c}},
		{"?kind=report", []int64{c}, []int64{a, b}},
		{"?state=cancelled", []int64{c}, []int64{a, b}},
		{"?state=available&queue=email,reports", []int64{a, b}, []int64{c}},
		{"?tag=urgent,vip", []int64{a}, []int64{b, c}},
		{"?args=" + url.QueryEscape(`{"to":"bob@example.com"}`), []int64{b}, []int64{a, c}},
	}
	for _, tc := range cases {
		status, body := e.get("/jobs" + tc.query)
		if status != http.StatusOK {
			t.Fatalf("jobs%s: %d\n%s", tc.query, status, body)
		}
		for _, id := range tc.want {
			mustContain(t, "jobs"+tc.query, body, rowOf(id))
		}
		for _, id := range tc.wantNone {
			mustNotContain(t, "jobs"+tc.query, body, rowOf(id))
		}
	}
	// Newest first.
	_, body := e.get("/jobs")
	if strings.Index(body, rowOf(c)) > strings.Index(body, rowOf(a)) {
		t.Error("jobs not newest first")
	}
	for _, bad := range []string{"?args=" + url.QueryEscape("{nope"), "?state=sleeping", "?cursor=garbage"} {
		status, body := e.get("/jobs" + bad)
		if status != http.StatusBadRequest || !strings.Contains(body, `class="error"`) {
			t.Errorf("jobs%s: %d, want 400 with the error shown", bad, status)
		}
	}
}

func TestJobsPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	params := make([]pgqueue.EnqueueManyParams, 120)
	for i := range params {
		params[i] = pgqueue.EnqueueManyParams{Args: reportArgs{N: i}}
	}
	if _, err := e.client.EnqueueMany(t.Context(), params); err != nil {
		t.Fatal(err)
	}
	next := regexp.MustCompile(`href="/jobs\?([^"]+)" id="next-page"`)
	row := regexp.MustCompile(`<tr data-id="(\d+)"`)
	seen := map[string]bool{}
	path := "/jobs?kind=report"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more pages than expected")
		}
		_, body := e.get(path)
		for _, m := range row.FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Fatalf("job %s listed twice", m[1])
			}
			seen[m[1]] = true
		}
		m := next.FindStringSubmatch(body)
		if m == nil {
			break
		}
		path = "/jobs?" + htmlUnescape(m[1])
		if !strings.Contains(path, "kind=report") {
			t.Fatalf("next page lost the filter: %s", path)
		}
	}
	if len(seen) != 120 {
		t.Errorf("paged through %d jobs, want 120", len(seen))
	}
}

func TestJobPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(context.Context, *pgqueue.Job[reportArgs]) error {
		return errors.New("report <b>failed</b>")
	}, nil); err != nil {
		t.Fatal(err)
	}
	worker, err := pgqueue.New(e.pool, &pgqueue.Config{Queues: map[string]pgqueue.QueueConfig{"reports": {MaxWorkers: 1}}, Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	res, err := worker.Enqueue(t.Context(), reportArgs{N: 3}, &pgqueue.EnqueueOpts{Queue: "reports", Tags: []string{"t1"}, Meta: map[string]any{"by": "test"},
		PartitionKey: "tenant <7>", SequenceKey: "order-42"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.ID
	pgqueuetest.WorkJob(t.Context(), t, worker, id)

	status, body := e.get(fmt.Sprintf("/jobs/%d", id))
	if status != http.StatusOK {
		t.Fatalf("job page: %d\n%s", status, body)
	}
	mustContain(t, "job page", body, `id="job-state">scheduled<`, `&#34;n&#34;: 3`, "report &lt;b&gt;failed&lt;/b&gt;",
		"Attempt 1</strong>", `<span class="tag">t1</span>`, "&#34;by&#34;: &#34;test&#34;", worker.ID(),
		fmt.Sprintf(`href="/jobs/%d/retry"`, id), fmt.Sprintf(`href="/jobs/%d/cancel"`, id), fmt.Sprintf(`href="/jobs/%d/delete"`, id),
		"attempt 1 failed", `id="job-partition-key">tenant &lt;7&gt;<`, `id="job-sequence-key">order-42<`)
	mustNotContain(t, "job page", body, "<b>failed", "tenant <7>")

	if status, _ := e.get("/jobs/999999"); status != http.StatusNotFound {
		t.Errorf("missing job: %d, want 404", status)
	}
	if status, _ := e.get("/jobs/abc"); status != http.StatusNotFound {
		t.Errorf("bad id: %d, want 404", status)
	}
}

func TestActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.enqueue(emailArgs{To: "x"}, &pgqueue.EnqueueOpts{Queue: "email"})
	jobPath := fmt.Sprintf("/jobs/%d", id)

	// Cancel: confirmation page, then POST.
	form := e.confirm(jobPath + "/cancel")
	if got := e.state(id); got != pgqueue.StateAvailable {
		t.Fatalf("the confirmation page changed the job: %s", got)
	}
	resp, _ := e.post(jobPath+"/cancel", form)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != jobPath+"?done=cancel" {
		t.Fatalf("cancel: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := e.state(id); got != pgqueue.StateCancelled {
		t.Fatalf("after cancel: %s", got)
	}
	_, body := e.get(jobPath + "?done=cancel")
	mustContain(t, "after cancel", body, `id="done">The job was cancelled`, `id="action-retry"`)
	mustNotContain(t, "after cancel", body, `id="action-cancel"`)

	// Retry.
	resp, _ = e.post(jobPath+"/retry", e.confirm(jobPath+"/retry"))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("retry: %d", resp.StatusCode)
	}
	if got := e.state(id); got != pgqueue.StateAvailable {
		t.Fatalf("after retry: %s", got)
	}

	// Pause and resume.
	resp, _ = e.post("/queues/pause", e.confirm("/queues/pause?name=email"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?done=pause" {
		t.Fatalf("pause: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body = e.get("/?done=pause")
	mustContain(t, "paused", body, `<span class="badge paused">paused</span>`, `href="/queues/resume?name=email"`, "The queue was paused.")
	resp, _ = e.post("/queues/resume", e.confirm("/queues/resume?name=email"))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	queues, err := e.client.QueueList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if q.Paused {
			t.Errorf("queue %s still paused", q.Name)
		}
	}

	// Delete.
	resp, _ = e.post(jobPath+"/delete", e.confirm(jobPath+"/delete"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/jobs?done=delete" {
		t.Fatalf("delete: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, err := e.client.JobGet(t.Context(), id); !errors.Is(err, pgqueue.ErrJobNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	// An action on a job that is gone.
	resp, _ = e.post(jobPath+"/retry", form)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("retry of a deleted job: %d, want 404", resp.StatusCode)
	}
	// An unknown action.
	resp, _ = e.post(jobPath+"/explode", form)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown action: %d, want 404", resp.StatusCode)
	}
}

func TestCSRFRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.enqueue(emailArgs{To: "x"}, nil)
	path := fmt.Sprintf("/jobs/%d/cancel", id)
	good := e.confirm(path)

	// Without the cookie: a fresh client, the token of another browser.
	stranger := &http.Client{CheckRedirect: e.http.CheckRedirect}
	resp, err := stranger.PostForm(e.base+path, good)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := e.read(resp); status != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Errorf("no cookie: %d %s", status, body)
	}
	// With the cookie but no or a wrong token.
	for _, form := range []url.Values{{}, {"csrf": {"AAAA"}}, {"csrf": {strings.ToUpper(good.Get("csrf"))}}} {
		if resp, body := e.post(path, form); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("token %q: %d", form.Get("csrf"), resp.StatusCode)
		}
	}
	// A cross-site request, even with the right cookie and token.
	req, _ := http.NewRequest(http.MethodPost, e.base+path, strings.NewReader(good.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err = e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if status, _ := e.read(resp); status != http.StatusForbidden {
		t.Errorf("cross-site: %d", status)
	}
	// Queue actions too.
	if resp, _ := e.post("/queues/pause", url.Values{"name": {"default"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("pause without token: %d", resp.StatusCode)
	}
	if got := e.state(id); got != pgqueue.StateAvailable {
		t.Fatalf("a refused request changed the job: %s", got)
	}
	if qs, _ := e.client.QueueList(t.Context()); len(qs) != 1 || qs[0].Paused {
		t.Fatalf("a refused request paused the queue")
	}
	// And the right token works.
	if resp, _ := e.post(path, good); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("good token: %d", resp.StatusCode)
	}
}

// TestGETDoesNotAct: every action's URL fetched with GET is the
// confirmation page and changes nothing; other methods are refused.
func TestGETDoesNotAct(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.enqueue(emailArgs{To: "x"}, nil)
	done := e.enqueue(emailArgs{To: "y"}, nil)
	if _, err := e.client.JobCancel(t.Context(), done); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fmt.Sprintf("/jobs/%d/cancel", id), fmt.Sprintf("/jobs/%d/delete", id),
		fmt.Sprintf("/jobs/%d/retry", done), "/queues/pause?name=default"} {
		status, body := e.get(p)
		if status != http.StatusOK || !strings.Contains(body, `<form method="post"`) {
			t.Errorf("GET %s: %d, want the confirmation form", p, status)
		}
	}
	if e.state(id) != pgqueue.StateAvailable || e.state(done) != pgqueue.StateCancelled {
		t.Fatal("a GET changed a job")
	}
	if qs, _ := e.client.QueueList(t.Context()); qs[0].Paused {
		t.Fatal("a GET paused a queue")
	}
	for _, method := range []string{http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(method, e.base+fmt.Sprintf("/jobs/%d/cancel", id), nil)
		resp, err := e.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if status, _ := e.read(resp); status != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", method, status)
		}
	}
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "read-only mode")
	secret := []byte(strings.Repeat("k", 32))
	e := newEnv(t, &pgqueueui.Options{ReadOnly: true, Secret: secret})
	id := e.enqueue(emailArgs{To: "x"}, &pgqueue.EnqueueOpts{Queue: "email"})

	_, body := e.get("/")
	mustContain(t, "overview", body, `id="read-only"`, `<tr data-queue="email">`)
	mustNotContain(t, "overview", body, "/queues/pause", "csrf")
	_, body = e.get(fmt.Sprintf("/jobs/%d", id))
	mustContain(t, "job", body, `id="job-state">available<`)
	mustNotContain(t, "job", body, `id="actions"`, "/cancel", "/delete")
	ids, wf := e.enqueueWorkflow([]pgqueue.EnqueueManyParams{{Args: reportArgs{N: 1}},
		{Args: reportArgs{N: 2}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}}})
	for _, p := range []string{"/workflows", fmt.Sprintf("/workflows/%d", wf), fmt.Sprintf("/jobs/%d", ids[1])} {
		status, body := e.get(p)
		if status != http.StatusOK {
			t.Errorf("GET %s: %d", p, status)
		}
		mustNotContain(t, p, body, "csrf", "/retry")
	}
	if resp, err := e.http.Get(e.base + "/"); err == nil {
		if len(resp.Cookies()) != 0 {
			t.Errorf("read-only handler set cookies: %v", resp.Cookies())
		}
		resp.Body.Close()
	}

	// A token of a writable handler with the same secret does not help.
	w := newEnv(t, &pgqueueui.Options{Secret: secret})
	form := w.confirm("/queues/pause?name=email")
	u, _ := url.Parse(w.base)
	e.http.Jar.SetCookies(u, w.http.Jar.Cookies(u))

	for _, p := range []string{fmt.Sprintf("/jobs/%d/cancel", id), "/queues/pause?name=email"} {
		if status, _ := e.get(p); status != http.StatusForbidden {
			t.Errorf("GET %s: %d, want 403", p, status)
		}
	}
	for _, p := range []string{fmt.Sprintf("/jobs/%d/cancel", id), fmt.Sprintf("/jobs/%d/delete", id), "/queues/pause"} {
		if resp, body := e.post(p, form); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("POST %s: %d, want 403", p, resp.StatusCode)
		}
	}
	if e.state(id) != pgqueue.StateAvailable {
		t.Fatal("read-only handler changed the job")
	}
	if qs, _ := e.client.QueueList(t.Context()); qs[0].Paused {
		t.Fatal("read-only handler paused the queue")
	}
}

// TestHostileDataEscaped: markup in args, errors, kinds and tags is text
// on every page that shows them.
func TestHostileDataEscaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	id := e.enqueue(emailArgs{To: hostileImg, Body: hostileScript}, &pgqueue.EnqueueOpts{Tags: []string{`"><img src=x onerror=alert(1)>`}})
	for _, p := range []string{"/jobs", fmt.Sprintf("/jobs/%d", id), "/jobs?tag=" + url.QueryEscape(`"><img src=x onerror=alert(1)>`),
		"/jobs?args=" + url.QueryEscape(`{"body":"`+strings.ReplaceAll(hostileScript, `"`, `\"`)+`"}`)} {
		status, body := e.get(p)
		if status != http.StatusOK {
			t.Fatalf("%s: %d", p, status)
		}
		mustContain(t, p, body, fmt.Sprintf(`data-id="%d"`, id), "&lt;script&gt;", "&lt;img src=x onerror=")
		mustNotContain(t, p, body, "<script>document", "<img", "onerror=\"document")
	}
	// A workflow of jobs whose kind is markup.
	ids, wf := e.enqueueWorkflow([]pgqueue.EnqueueManyParams{{Args: hostileKindArgs{}},
		{Args: hostileKindArgs{}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}}})
	for _, p := range []string{fmt.Sprintf("/workflows/%d", wf), fmt.Sprintf("/jobs/%d", ids[1])} {
		status, body := e.get(p)
		if status != http.StatusOK {
			t.Fatalf("%s: %d", p, status)
		}
		mustNotContain(t, p, body, "<img")
	}
	_, body := e.get(fmt.Sprintf("/workflows/%d", wf))
	mustContain(t, "workflow page", body, "<td>&lt;img src=x onerror=alert(1)&gt;</td>")
	// The filter's own echo is escaped too.
	_, body = e.get("/jobs?kind=" + url.QueryEscape(hostileImg))
	mustNotContain(t, "kind filter", body, "<img")
	mustContain(t, "kind filter", body, "&#34;&gt;&lt;img")
}

func TestPrefix(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the dashboard mounted under a prefix")
	e := newEnv(t, &pgqueueui.Options{Prefix: "/admin/queue"})
	id := e.enqueue(emailArgs{To: "x"}, &pgqueue.EnqueueOpts{Queue: "email"})
	ids, wf := e.enqueueWorkflow([]pgqueue.EnqueueManyParams{{Args: reportArgs{N: 1}},
		{Args: reportArgs{N: 2}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}}})

	status, body := e.get("/")
	if status != http.StatusOK {
		t.Fatalf("prefix root: %d", status)
	}
	mustContain(t, "overview", body, `href="/admin/queue/jobs"`, `src="/admin/queue/static/app.js"`,
		`data-refresh="/admin/queue/fragment/overview"`, `href="/admin/queue/queues/pause?name=email"`, `href="/admin/queue/queue/email"`)
	for _, p := range []string{"/static/app.js", "/fragment/overview", "/jobs", fmt.Sprintf("/jobs/%d", id), "/locks", "/periodic", "/queue/email",
		"/workflows", fmt.Sprintf("/workflows/%d", wf)} {
		if status, _ := e.get(p); status != http.StatusOK {
			t.Errorf("%s under the prefix: %d", p, status)
		}
	}
	// The bare prefix redirects to its root; paths beside it are the app's.
	resp, err := e.http.Get(e.srv.URL + "/admin/queue")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/admin/queue/" {
		t.Errorf("bare prefix: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = e.http.Get(e.srv.URL + "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("/jobs outside the prefix: %d, want the app's", resp.StatusCode)
	}

	// Actions post and redirect under the prefix; the cookie is scoped to it.
	form := e.confirm(fmt.Sprintf("/jobs/%d/cancel", id))
	u, _ := url.Parse(e.srv.URL + "/other")
	if len(e.http.Jar.Cookies(u)) != 0 {
		t.Error("the CSRF cookie is sent outside the prefix")
	}
	resp2, _ := e.post(fmt.Sprintf("/jobs/%d/cancel", id), form)
	if resp2.StatusCode != http.StatusSeeOther || resp2.Header.Get("Location") != fmt.Sprintf("/admin/queue/jobs/%d?done=cancel", id) {
		t.Errorf("cancel under the prefix: %d %s", resp2.StatusCode, resp2.Header.Get("Location"))
	}
	_, body = e.get(fmt.Sprintf("/jobs/%d/retry", id))
	mustContain(t, "confirm", body, fmt.Sprintf(`action="/admin/queue/jobs/%d/retry"`, id))
	form = e.confirm("/queue/email")
	form.Set("max_running", "2")
	resp2, _ = e.post("/queue/email/limits", form)
	if resp2.StatusCode != http.StatusSeeOther || resp2.Header.Get("Location") != "/admin/queue/queue/email?done=limits" {
		t.Errorf("limits under the prefix: %d %s", resp2.StatusCode, resp2.Header.Get("Location"))
	}
	_, body = e.get("/queue/email")
	mustContain(t, "queue page", body, `action="/admin/queue/queue/email/limits"`, `href="/admin/queue/jobs?queue=email"`)
	_, body = e.get(fmt.Sprintf("/workflows/%d", wf))
	mustContain(t, "workflow page", body, fmt.Sprintf(`href="/admin/queue/jobs/%d"`, ids[1]), fmt.Sprintf(`data-parent="%d"`, ids[0]))
	_, body = e.get(fmt.Sprintf("/jobs/%d", ids[1]))
	mustContain(t, "job page", body, fmt.Sprintf(`href="/admin/queue/workflows/%d"`, wf))
	resp, err = e.http.Get(e.base + fmt.Sprintf("/workflows?id=%d", wf))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != fmt.Sprintf("/admin/queue/workflows/%d", wf) {
		t.Errorf("workflow lookup under the prefix: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	pool := pgqueuetest.NewPool(t)
	for _, o := range []*pgqueueui.Options{
		{Prefix: "admin"}, {Prefix: "/admin/"}, {Secret: []byte("short")}, {RefreshInterval: -time.Second}, {Schema: "Bad-Schema"},
	} {
		if _, err := pgqueueui.New(pool, o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if _, err := pgqueueui.New(nil, nil); !errors.Is(err, pgqueueui.ErrInvalidOptions) {
		t.Errorf("nil pool: %v", err)
	}
}

// TestLongArgsClipped: the list shows the start of large args, the job's
// page all of them.
func TestLongArgsClipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	long := strings.Repeat("é", 2000)
	id := e.enqueue(emailArgs{To: "x", Body: long}, nil)
	_, list := e.get("/jobs")
	mustContain(t, "list", list, strings.Repeat("é", 200), "…</code>")
	mustNotContain(t, "list", list, strings.Repeat("é", 400))
	_, page := e.get(fmt.Sprintf("/jobs/%d", id))
	mustContain(t, "job page", page, long)
}
