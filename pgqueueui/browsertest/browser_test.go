package browsertest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pgqueue/pgqueue"
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

// The hostile job's args: if either ran, the page's title would change or
// an img element would exist.
const (
	hostileScript = `<script>document.title="pwned"</script>`
	hostileImg    = `"><img src=x onerror="document.title='pwned'">`
)

// chromium finds Debian's chromium. Outside CI a missing browser skips the
// test; under CI=true it fails it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH: install Debian's packages with `apt-get install -y chromium chromium-driver` to run the browser tests"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// screenshotDir is where the pages' screenshots go: PGQUEUEUI_SCREENSHOTS
// (docs/dashboard to refresh the docs' pictures), else a temporary
// directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("PGQUEUEUI_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func TestDashboardInChromium(t *testing.T) {
	exe := chromium(t)
	pool := pgqueuetest.NewPool(t)
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	enqueue := func(args pgqueue.JobArgs, opts *pgqueue.EnqueueOpts) int64 {
		t.Helper()
		res, err := client.Enqueue(ctx, args, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	for i := range 5 {
		enqueue(emailArgs{To: fmt.Sprintf("user%d@example.com", i), Body: "hello"}, &pgqueue.EnqueueOpts{Queue: "email", Tags: []string{"newsletter"}})
	}
	enqueue(reportArgs{N: 2}, &pgqueue.EnqueueOpts{Queue: "reports", RunAt: time.Now().Add(time.Hour)})
	failed := enqueue(reportArgs{N: 1}, &pgqueue.EnqueueOpts{Queue: "reports"})
	for _, id := range []int64{enqueue(reportArgs{N: 3}, &pgqueue.EnqueueOpts{Queue: "reports"}), failed} {
		if _, err := client.JobCancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	hostile := enqueue(emailArgs{To: hostileImg, Body: hostileScript}, &pgqueue.EnqueueOpts{Queue: "email", Tags: []string{`"><img src=x>`}})
	// A workflow: two fetches, a report after both, a mail after the
	// report; the first fetch is cancelled, which cancels what waits for it.
	flow, err := client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
		{Args: reportArgs{N: 10}, Opts: &pgqueue.EnqueueOpts{Queue: "flows", Name: "fetch-a"}},
		{Args: reportArgs{N: 11}, Opts: &pgqueue.EnqueueOpts{Queue: "flows", Name: "fetch-b"}},
		{Args: reportArgs{N: 12}, Opts: &pgqueue.EnqueueOpts{Queue: "flows", Name: "report", DependsOn: []pgqueue.Dependency{
			pgqueue.DependsOnName("fetch-a"), pgqueue.DependsOnName("fetch-b")}}},
		{Args: emailArgs{To: "boss@example.com", Body: "report ready"}, Opts: &pgqueue.EnqueueOpts{Queue: "flows", DependsOn: []pgqueue.Dependency{
			pgqueue.DependsOnName("report")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.JobCancel(ctx, flow.IDs[0]); err != nil {
		t.Fatal(err)
	}

	h, err := pgqueueui.New(pool, &pgqueueui.Options{Prefix: "/ui", RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h) // a real server on a free port of 127.0.0.1
	defer srv.Close()
	base := srv.URL + "/ui"

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first Run starts the browser under bctx, which must carry no
	// timeout; the steps after it get one.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	tctx, cancelTimeout := context.WithTimeout(bctx, 90*time.Second)
	defer cancelTimeout()

	shots := screenshotDir(t)
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	do := func(step string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(tctx, steps...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	// text reads an element's text in one evaluation: the overview's
	// refresh may replace the element between a query and a read.
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(tctx, chromedp.Evaluate[string](fmt.Sprintf("document.querySelector(%q).innerText", sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return strings.TrimSpace(v)
	}
	// untouched checks that no hostile markup ran or became an element.
	untouched := func(where string) {
		t.Helper()
		title, err := chromedp.Run(tctx, chromedp.Title())
		if err != nil {
			t.Fatal(err)
		}
		imgs, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll("img").length`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(title, "pwned") || imgs != 0 {
			t.Fatalf("%s: hostile markup took effect: title %q, %d img elements", where, title, imgs)
		}
	}

	// The overview, and its live refresh: the script (allowed by the CSP
	// as a file of 'self') swaps the fragment in twice.
	do("overview",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="email"]`)),
		chromedp.WaitReady(chromedp.CSS(`#live[data-refreshed="2"]`)),
		shot("overview"))
	if queues := text(`#queues`); !strings.Contains(queues, "email") || !strings.Contains(queues, "reports") {
		t.Fatalf("overview queues: %q", queues)
	}
	untouched("overview")

	// Filter the jobs: the cancelled reports only.
	do("filter jobs",
		chromedp.Navigate(base+"/jobs"),
		chromedp.WaitVisible(chromedp.CSS(`#jobs`)),
		shot("jobs"),
		chromedp.SendKeys(chromedp.CSS(`#f-queue`), "reports"),
		chromedp.SetValue(chromedp.CSS(`#f-state`), "cancelled"),
		chromedp.Click(chromedp.CSS(`#f-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#f-clear`)))
	ids, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#jobs tbody tr")).map(r => r.dataset.id + ":" + r.dataset.state)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || !strings.HasSuffix(ids[0], ":cancelled") || ids[1] != fmt.Sprintf("%d:cancelled", failed) {
		t.Fatalf("filtered jobs: %v", ids)
	}

	// Open the job, retry it through the confirmation page, see its state.
	do("open job",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#jobs a[href="/ui/jobs/%d"]`, failed))),
		chromedp.WaitVisible(chromedp.CSS(`#job-state`)))
	if state := text(`#job-state`); state != "cancelled" {
		t.Fatalf("job page state %q", state)
	}
	do("retry",
		shot("job"),
		chromedp.Click(chromedp.CSS(`#action-retry`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-form`)),
		shot("confirm"),
		chromedp.Click(chromedp.CSS(`#confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#done`)))
	if state, done := text(`#job-state`), text(`#done`); state != "available" || !strings.Contains(done, "retried") {
		t.Fatalf("after retry: state %q, note %q", state, done)
	}
	if j, err := client.JobGet(ctx, failed); err != nil || j.State != pgqueue.StateAvailable {
		t.Fatalf("after retry the database has %v, %v", j, err)
	}

	// Pause a queue from the overview. The link is clicked from the page's
	// side, in one evaluation, since a refresh may replace it any moment.
	do("pause",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="email"] a.action`)),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#queues tr[data-queue="email"] a.action').click()`),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-form`)),
		chromedp.Click(chromedp.CSS(`#confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="email"] .paused`)))
	if badge := text(`#queues tr[data-queue="email"] .paused`); badge != "paused" {
		t.Fatalf("after pause: %q", badge)
	}

	// The hostile job: its markup is text, on the list and on its page.
	do("hostile list", chromedp.Navigate(base+"/jobs?queue=email"), chromedp.WaitVisible(chromedp.CSS(`#jobs`)))
	untouched("jobs list")
	do("hostile job",
		chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, hostile)),
		chromedp.WaitVisible(chromedp.CSS(`#job-args`)))
	untouched("job page")
	if args := text(`#job-args`); !strings.Contains(args, `<script>document.title=`) || !strings.Contains(args, `<img src=x onerror=`) {
		t.Fatalf("hostile args not shown as text: %q", args)
	}

	// The workflow: reached from the lookup form, its cancelled fetch
	// retried from its job page resumes it.
	do("workflow",
		chromedp.Navigate(base+"/workflows"),
		chromedp.WaitVisible(chromedp.CSS(`#w-id`)),
		chromedp.SendKeys(chromedp.CSS(`#w-id`), fmt.Sprint(flow.Workflow)),
		chromedp.Click(chromedp.CSS(`#w-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`#workflow-jobs`)))
	if counts := text(`#workflow-counts`); !strings.Contains(counts, "3 cancelled") || !strings.Contains(counts, "1 available") {
		t.Fatalf("workflow counts: %q", counts)
	}
	do("workflow retry",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#workflow-jobs tr[data-id="%d"] td a`, flow.IDs[0]))),
		chromedp.WaitVisible(chromedp.CSS(`#job-workflow`)),
		chromedp.Click(chromedp.CSS(`#action-retry`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-form`)),
		chromedp.Click(chromedp.CSS(`#confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#done`)),
		chromedp.Click(chromedp.CSS(`#job-workflow`)),
		chromedp.WaitVisible(chromedp.CSS(`#workflow-jobs`)),
		shot("workflow"))
	if counts, status := text(`#workflow-counts`), text(`#workflow-status`); !strings.Contains(counts, "2 blocked") || !strings.Contains(status, "in progress") {
		t.Fatalf("workflow after the retry: %q, %q", status, counts)
	}
	untouched("workflow")

	// Cancel the whole workflow from its page, behind the confirmation.
	do("workflow cancel",
		chromedp.Click(chromedp.CSS(`#action-cancel-workflow`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm-form`)),
		chromedp.Click(chromedp.CSS(`#confirm`)),
		chromedp.WaitVisible(chromedp.CSS(`#done`)))
	if counts, status := text(`#workflow-counts`), text(`#workflow-status`); !strings.Contains(counts, "4 cancelled") || !strings.Contains(status, "done") {
		t.Fatalf("workflow after its cancel: %q, %q", status, counts)
	}
	if w, err := client.WorkflowGet(ctx, flow.Workflow); err != nil || w.Counts[pgqueue.StateCancelled] != 4 {
		t.Fatalf("after the workflow's cancel the database has %v, %v", w, err)
	}

	do("locks", chromedp.Navigate(base+"/locks"), chromedp.WaitVisible(chromedp.CSS(`h1`)), shot("locks"))
}
