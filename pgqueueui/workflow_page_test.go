package pgqueueui_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
	"github.com/pgqueue/pgqueue/pgqueueui"
)

// enqueueWorkflow inserts params as one batch and returns its ids and
// workflow.
func (e *env) enqueueWorkflow(params []pgqueue.EnqueueManyParams) ([]int64, int64) {
	e.t.Helper()
	res, err := e.client.EnqueueMany(context.Background(), params)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.Workflow == 0 {
		e.t.Fatal("the batch has no workflow")
	}
	return res.IDs, res.Workflow
}

var workflowRow = regexp.MustCompile(`<tr data-id="(\d+)" data-state="(\w+)">`)

// TestWorkflowPage: a workflow's page shows its status, counts and jobs
// with what each waits for; jobs link to it from the list and their
// pages; a missing workflow is 404, an invalid id 400.
func TestWorkflowPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ids, wf := e.enqueueWorkflow([]pgqueue.EnqueueManyParams{
		{Args: emailArgs{To: "a"}, Opts: &pgqueue.EnqueueOpts{Name: "a"}},
		{Args: emailArgs{To: "b"}, Opts: &pgqueue.EnqueueOpts{Name: "b"}},
		{Args: reportArgs{N: 1}, Opts: &pgqueue.EnqueueOpts{Name: "report", DependsOn: []pgqueue.Dependency{
			pgqueue.DependsOnName("a"), pgqueue.DependsOnName("b").OnFailure(pgqueue.ParentFailureWait)}}},
		{Args: reportArgs{N: 2}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{
			pgqueue.DependsOnName("report").OnFailure(pgqueue.ParentFailureRun)}}},
	})
	a, b, report, last := ids[0], ids[1], ids[2], ids[3]
	outside := e.enqueue(emailArgs{To: "alone"}, nil)
	path := fmt.Sprintf("/workflows/%d", wf)

	status, body := e.get(path)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, status, body)
	}
	mustContain(t, "workflow page", body, fmt.Sprintf("<title>Workflow %d · pgqueue</title>", wf),
		`id="workflow-status"><span class="state running">in progress</span>`,
		`<span class="state blocked" data-state="blocked">2 blocked</span>`,
		`<span class="state available" data-state="available">2 available</span>`,
		fmt.Sprintf(`href="/jobs/%d">%d</a>`, report, report),
		fmt.Sprintf(`data-parent="%d">%d <span class="state available">available</span></a>`, a, a),
		fmt.Sprintf(`data-parent="%d">%d <span class="state available">available</span> <span class="policy">on failure: wait</span></a>`, b, b),
		fmt.Sprintf(`data-parent="%d">%d <span class="state blocked">blocked</span> <span class="policy">on failure: run</span></a>`, report, report),
		"2 of 2 still hold it:", "1 of 1 still hold it:")
	mustNotContain(t, "workflow page", body, `id="next-page"`, `id="first-page"`, fmt.Sprintf(`data-id="%d"`, outside))
	var rows []string
	for _, m := range workflowRow.FindAllStringSubmatch(body, -1) {
		rows = append(rows, m[1]+":"+m[2])
	}
	want := []string{fmt.Sprint(a, ":available"), fmt.Sprint(b, ":available"), fmt.Sprint(report, ":blocked"), fmt.Sprint(last, ":blocked")}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("workflow rows %v, want %v", rows, want)
	}

	// The job's page names its workflow and both sides of its edges.
	_, body = e.get(fmt.Sprintf("/jobs/%d", report))
	mustContain(t, "child's page", body, fmt.Sprintf(`<a id="job-workflow" href="/workflows/%d">%d</a>`, wf, wf),
		`id="job-parents"`, fmt.Sprintf(`<tr data-parent="%d">`, a), fmt.Sprintf(`<tr data-parent="%d">`, b),
		`id="job-children"`, fmt.Sprintf(`<tr data-child="%d">`, last), "<td>run</td>", "<td>wait</td>")
	_, body = e.get(fmt.Sprintf("/jobs/%d", a))
	mustContain(t, "parent's page", body, `id="job-workflow"`, `id="job-children"`, fmt.Sprintf(`<tr data-child="%d">`, report))
	mustNotContain(t, "parent's page", body, `id="job-parents"`)
	_, body = e.get(fmt.Sprintf("/jobs/%d", outside))
	mustNotContain(t, "a job outside workflows", body, `id="job-workflow"`, `id="job-parents"`, `id="job-children"`)

	// The jobs list links each job of a workflow to it.
	_, body = e.get("/jobs")
	if n := strings.Count(body, fmt.Sprintf(`<a class="workflow" href="/workflows/%d">%d</a>`, wf, wf)); n != 4 {
		t.Errorf("jobs list: %d workflow links, want 4\n%s", n, body)
	}

	// The state filter offers blocked.
	_, body = e.get("/jobs?state=blocked")
	mustContain(t, "blocked jobs", body, `<option value="blocked" selected>`, fmt.Sprintf(`<tr data-id="%d"`, report), fmt.Sprintf(`<tr data-id="%d"`, last))
	mustNotContain(t, "blocked jobs", body, fmt.Sprintf(`<tr data-id="%d"`, a))

	// The overview and the queue's page count the blocked jobs.
	_, body = e.get("/")
	mustContain(t, "overview", body, `<th class="n">Blocked</th>`,
		`<td class="n">2</td><td class="n">0</td><td class="n">3</td><td class="n">0</td>`)
	_, body = e.get("/queue/default")
	mustContain(t, "queue page", body, "2 blocked, 0 scheduled, 3 available, 0 running")

	// The lookup: a form that goes to the page, and the newest workflows.
	status, body = e.get("/workflows")
	if status != http.StatusOK {
		t.Fatalf("GET /workflows: %d", status)
	}
	mustContain(t, "lookup", body, `id="workflow-lookup"`, fmt.Sprintf(`<a href="/workflows/%d">Workflow %d</a>`, wf, wf))
	resp, err := e.http.Get(e.base + fmt.Sprintf("/workflows?id=+%d+", wf))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path {
		t.Errorf("lookup: %d %s, want 303 to %s", resp.StatusCode, resp.Header.Get("Location"), path)
	}
	if status, _ := e.get("/workflows?id="); status != http.StatusOK {
		t.Errorf("lookup of nothing: %d, want 200", status)
	}
	status, body = e.get("/workflows?id=" + "%3Cb%3E")
	if status != http.StatusBadRequest {
		t.Errorf("lookup of an invalid id: %d, want 400", status)
	}
	mustContain(t, "invalid lookup", body, `class="error"`, "&lt;b&gt;")
	mustNotContain(t, "invalid lookup", body, "<b>")

	// Not found, invalid.
	status, body = e.get(fmt.Sprintf("/workflows/%d", wf+1000))
	if status != http.StatusNotFound || !strings.Contains(body, "does not exist") {
		t.Errorf("missing workflow: %d, want 404\n%s", status, body)
	}
	for _, p := range []string{"/workflows/abc", "/workflows/0", "/workflows/-3", "/workflows/99999999999999999999", path + "?after=x", path + "?after=-1"} {
		if status, _ := e.get(p); status != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", p, status)
		}
	}

	// Every job final: the workflow is done.
	for _, id := range []int64{a, b, last} {
		if _, err := e.client.JobCancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.client.JobCancel(t.Context(), report); err != nil && !errors.Is(err, pgqueue.ErrJobNotFound) {
		t.Fatal(err)
	}
	_, body = e.get(path)
	mustContain(t, "finished workflow", body, `<span class="state completed">done</span>`)
	w, err := e.client.WorkflowGet(t.Context(), wf)
	if err != nil || !w.Done() {
		t.Fatalf("WorkflowGet: %+v, %v", w, err)
	}
}

// TestWorkflowPageLarge: a workflow of 10,000 jobs (a batch of 9,999
// and its callback) is shown 100 jobs a page, each naming a bounded
// number of its parents, and the pages together list every job once.
// WorkflowGet itself reads all of them.
func TestWorkflowPageLarge(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a workflow of 10,000 jobs")
	e := newEnv(t, nil)
	jobs := make([]pgqueue.EnqueueManyParams, 9_999)
	for i := range jobs {
		jobs[i] = pgqueue.EnqueueManyParams{Args: reportArgs{N: i}}
	}
	res, err := e.client.EnqueueBatch(t.Context(), jobs, pgqueue.EnqueueManyParams{Args: emailArgs{To: "done"}})
	if err != nil {
		t.Fatal(err)
	}
	callback := res.IDs[len(res.IDs)-1]
	w, err := e.client.WorkflowGet(t.Context(), res.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 10_000 || len(w.Edges) != 9_999 {
		t.Fatalf("WorkflowGet: %d jobs, %d edges", len(w.Jobs), len(w.Edges))
	}

	next := regexp.MustCompile(`href="/workflows/\d+\?after=(\d+)" id="next-page"`)
	seen := map[string]bool{}
	path := fmt.Sprintf("/workflows/%d", res.Workflow)
	var body string
	for pages := 1; ; pages++ {
		if pages > 100 {
			t.Fatal("more than 100 pages")
		}
		var status int
		status, body = e.get(path)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, status)
		}
		if len(body) > 200_000 {
			t.Fatalf("GET %s: %d bytes", path, len(body))
		}
		rows := workflowRow.FindAllStringSubmatch(body, -1)
		if len(rows) != 100 {
			t.Fatalf("GET %s: %d rows, want 100", path, len(rows))
		}
		if pages == 1 {
			mustContain(t, "first page", body, `<span class="state available" data-state="available">9999 available</span>`,
				`<span class="state blocked" data-state="blocked">1 blocked</span>`, "this workflow has 10000 jobs")
		} else {
			mustContain(t, "a later page", body, fmt.Sprintf(`href="/workflows/%d" id="first-page"`, res.Workflow))
		}
		for _, m := range rows {
			if seen[m[1]] {
				t.Fatalf("job %s listed twice", m[1])
			}
			seen[m[1]] = true
		}
		m := next.FindStringSubmatch(body)
		if m == nil {
			break
		}
		path = fmt.Sprintf("/workflows/%d?after=%s", res.Workflow, m[1])
	}
	if len(seen) != 10_000 {
		t.Fatalf("the pages listed %d jobs, want 10000", len(seen))
	}
	// The last page ends with the callback, waiting for 9,999 jobs: eight
	// named, the rest counted.
	mustContain(t, "last page", body, fmt.Sprintf(`<tr data-id="%d" data-state="blocked">`, callback),
		"9999 of 9999 still hold it:", "and 9991 more (on the job's page)")
	if n := strings.Count(body, `class="dep"`); n != 8 {
		t.Errorf("the callback's row names %d parents, want 8", n)
	}
	// Its page names fifty and counts the rest.
	_, body = e.get(fmt.Sprintf("/jobs/%d", callback))
	if n := strings.Count(body, "<tr data-parent="); n != 50 {
		t.Errorf("the callback's page names %d parents, want 50", n)
	}
	mustContain(t, "callback's page", body, `id="more-parents">And 9949 more`)
	_, body = e.get(fmt.Sprintf("/jobs/%d", res.IDs[0]))
	mustContain(t, "a parent's page", body, fmt.Sprintf(`<tr data-child="%d">`, callback))
}

// TestWorkflowRetryResumes: a parent that fails cancels the jobs waiting
// for it; retrying it through the dashboard brings them back blocked, and
// its completion releases them.
func TestWorkflowRetryResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	var fail atomic.Bool
	fail.Store(true)
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(context.Context, *pgqueue.Job[emailArgs]) error {
		if fail.Load() {
			return errors.New("smtp down")
		}
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	worker, err := pgqueue.New(e.pool, &pgqueue.Config{Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1}}, Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	ids, wf := e.enqueueWorkflow([]pgqueue.EnqueueManyParams{
		{Args: emailArgs{To: "a"}, Opts: &pgqueue.EnqueueOpts{MaxAttempts: 1}},
		{Args: reportArgs{N: 1}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}},
		{Args: reportArgs{N: 2}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(1)}}},
	})
	parent, child, grandchild := ids[0], ids[1], ids[2]
	path := fmt.Sprintf("/workflows/%d", wf)

	if r := pgqueuetest.WorkJob(t.Context(), t, worker, parent); r.Job.State != pgqueue.StateDiscarded {
		t.Fatalf("parent ended %s, want discarded", r.Job.State)
	}
	_, body := e.get(path)
	mustContain(t, "failed workflow", body, `<span class="state completed">done</span>`, "1 discarded", "2 cancelled",
		fmt.Sprintf(`<tr data-id="%d" data-state="cancelled">`, child), fmt.Sprintf(`<tr data-id="%d" data-state="cancelled">`, grandchild))

	jobPath := fmt.Sprintf("/jobs/%d", parent)
	resp, _ := e.post(jobPath+"/retry", e.confirm(jobPath+"/retry"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != jobPath+"?done=retry" {
		t.Fatalf("retry: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := []pgqueue.JobState{e.state(parent), e.state(child), e.state(grandchild)}; fmt.Sprint(got) != "[available blocked blocked]" {
		t.Fatalf("after the retry: %v, want [available blocked blocked]", got)
	}
	_, body = e.get(path)
	mustContain(t, "resumed workflow", body, `<span class="state running">in progress</span>`, "1 available", "2 blocked")

	fail.Store(false)
	if r := pgqueuetest.WorkJob(t.Context(), t, worker, parent); r.Job.State != pgqueue.StateCompleted {
		t.Fatalf("parent ended %s on its retry, want completed", r.Job.State)
	}
	if got := e.state(child); got != pgqueue.StateAvailable {
		t.Fatalf("child after its parent completed: %s, want available", got)
	}
	_, body = e.get(path)
	mustContain(t, "released child", body, fmt.Sprintf(`<tr data-id="%d" data-state="available">`, child),
		fmt.Sprintf(`data-parent="%d">%d <span class="state completed">completed</span>`, parent, parent), "1, none holds it now:")
}

// TestWorkflowActions: the workflow page offers "Cancel workflow"
// while some job has not ended and "Retry failed jobs" while some job was
// discarded or cancelled; confirmed, each acts on the whole workflow and
// the page says so; a read-only dashboard offers neither.
func TestWorkflowActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ids, wf := e.enqueueWorkflow([]pgqueue.EnqueueManyParams{
		{Args: emailArgs{To: "a"}},
		{Args: reportArgs{N: 1}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}},
		{Args: reportArgs{N: 2}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0).OnFailure(pgqueue.ParentFailureWait)}}},
	})
	path := fmt.Sprintf("/workflows/%d", wf)
	_, body := e.get(path)
	mustContain(t, "workflow in progress", body, fmt.Sprintf(`id="action-cancel-workflow" href="%s/cancel"`, path))

	resp, _ := e.post(path+"/cancel", e.confirm(path+"/cancel"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path+"?done=cancel-workflow" {
		t.Fatalf("cancel: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, id := range ids {
		if got := e.state(id); got != pgqueue.StateCancelled {
			t.Errorf("job %d after the cancel: %s", id, got)
		}
	}
	_, body = e.get(path + "?done=cancel-workflow")
	mustContain(t, "cancelled workflow", body, `id="done"`, "3 cancelled", `<span class="state completed">done</span>`,
		fmt.Sprintf(`id="action-retry-workflow" href="%s/retry"`, path))
	if strings.Contains(body, "action-cancel-workflow") {
		t.Error("a done workflow offers to cancel it")
	}

	// Retry what failed: the first job runs again, the others wait for it.
	resp, _ = e.post(path+"/retry", e.confirm(path+"/retry"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path+"?done=retry-workflow" {
		t.Fatalf("retry: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := []pgqueue.JobState{e.state(ids[0]), e.state(ids[1]), e.state(ids[2])}; fmt.Sprint(got) != "[available blocked blocked]" {
		t.Fatalf("after the workflow's retry: %v, want [available blocked blocked]", got)
	}
	_, body = e.get(path + "?done=retry-workflow")
	mustContain(t, "retried workflow", body, "were retried", `<span class="state running">in progress</span>`, "action-cancel-workflow")
	if strings.Contains(body, "action-retry-workflow") {
		t.Error("a workflow with nothing failed offers to retry it")
	}
	if status, _ := e.get(path + "/pause"); status != http.StatusNotFound {
		t.Errorf("GET %s/pause: %d, want 404", path, status)
	}

	// Without the CSRF token, nothing happens.
	resp, _ = e.post(path+"/cancel", nil)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST without a token: %d, want 403", resp.StatusCode)
	}
	if status, _ := e.get("/workflows/999999/cancel"); status != http.StatusOK {
		t.Errorf("GET the confirmation of an unknown workflow: %d", status)
	}
	resp, _ = e.post("/workflows/999999/cancel", e.confirm("/workflows/999999/cancel"))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("cancel an unknown workflow: %d, want 404", resp.StatusCode)
	}

	ro := newEnv(t, &pgqueueui.Options{ReadOnly: true})
	_, wf2 := ro.enqueueWorkflow([]pgqueue.EnqueueManyParams{
		{Args: emailArgs{To: "b"}},
		{Args: reportArgs{N: 3}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}},
	})
	_, body = ro.get(fmt.Sprintf("/workflows/%d", wf2))
	if strings.Contains(body, "action-cancel-workflow") {
		t.Error("a read-only dashboard offers to cancel a workflow")
	}
	if status, _ := ro.get(fmt.Sprintf("/workflows/%d/cancel", wf2)); status != http.StatusForbidden {
		t.Errorf("read-only confirmation page: %d, want 403", status)
	}
}
