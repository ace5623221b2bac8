package pgqueueui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testdb"
	"github.com/pgqueue/pgqueue/pgqueueui"
)

// Mount the dashboard under /admin/queue, behind the service's own
// authentication (here a header check standing in for it), read-only for
// this audience.
func ExampleNew() {
	pool, drop := testdb.ExamplePool("pgqueueui_example")
	defer drop()
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(context.Background(), emailArgs{To: "ops@example.com"}, &pgqueue.EnqueueOpts{Queue: "email"}); err != nil {
		panic(err)
	}

	ui, err := pgqueueui.New(pool, &pgqueueui.Options{Prefix: "/admin/queue", ReadOnly: true})
	if err != nil {
		panic(err)
	}
	requireAdmin := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Admin") != "yes" {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/queue/", requireAdmin(ui))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, admin := range []string{"no", "yes"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/admin/queue/", nil)
		req.Header.Set("X-Admin", admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, strings.Contains(string(body), `<tr data-queue="email">`))
	}
	// Output:
	// 403 false
	// 200 true
}
