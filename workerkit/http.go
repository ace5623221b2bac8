package workerkit

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// pingTimeout bounds /readyz's database check.
const pingTimeout = 2 * time.Second

// handler serves /healthz, /readyz and /metrics.
func (p *process) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", p.readyz)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if h := p.metricsHandler.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		p.metrics.handler.ServeHTTP(w, r)
	})
	return mux
}

// readyz answers 200 once the client started, while the database answers
// and its schema is current; 503 while starting, while draining, when the
// database does not answer within pingTimeout, and while the client finds
// its schema dropped or migrated down (Client.SchemaErr).
func (p *process) readyz(w http.ResponseWriter, r *http.Request) {
	switch p.state.Load() {
	case stateStarting:
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	case stateDraining:
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pingTimeout)
	defer cancel()
	if err := p.pool.Load().Ping(ctx); err != nil {
		http.Error(w, "database unreachable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if c := p.client.Load(); c != nil {
		if err := c.SchemaErr(); err != nil {
			http.Error(w, "schema not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ready")
}
