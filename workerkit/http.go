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

// readyz answers 200 once the client started and while the database
// answers; 503 while starting, while draining, and when the database does
// not answer within pingTimeout.
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
	fmt.Fprintln(w, "ready")
}
