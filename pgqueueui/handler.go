// Package pgqueueui is a web dashboard for pgqueue: queues with their
// counts, throughput, pauses and flow limits (and, on a queue's page, its
// jobs held back by them), the maintenance leader, jobs with filters and
// their details, workflows (their status and their jobs with what each
// waits for), lease and advisory locks, and periodic jobs; with retry,
// cancel, delete, pause and resume behind a confirmation page, a POST and
// a CSRF token, and a queue's limits set by a form that POSTs with one.
//
// A Handler is an http.Handler a service mounts under any path prefix,
// behind its own authentication middleware:
//
//	ui, err := pgqueueui.New(pool, &pgqueueui.Options{Prefix: "/admin/queue"})
//	mux.Handle("/admin/queue/", requireAdmin(ui))
//
// Pages are rendered on the server with html/template, which escapes every
// value (job args, errors, kinds and tags are data, never markup); assets
// are embedded; the only script is a small file of the package, allowed by
// a Content-Security-Policy that forbids inline script. docs/guides/dashboard.md
// says what each page shows.
package pgqueueui

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// ErrInvalidOptions is returned by New for options it cannot use.
var ErrInvalidOptions = errors.New("pgqueueui: invalid options")

// DefaultRefreshInterval is how often the overview refreshes itself unless
// Options.RefreshInterval says otherwise.
const DefaultRefreshInterval = 2 * time.Second

// ContentSecurityPolicy is the policy every response carries: only the
// package's own script and stylesheet, no inline script or style, no
// frames, forms posting only back to the dashboard.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// csrfCookie holds the browser's random CSRF value; forms carry its HMAC.
const csrfCookie = "pgqueueui_csrf"

// Options configures a Handler. The zero value serves the default schema at
// the root path, with actions enabled.
type Options struct {
	// Schema is the schema of pgqueue's tables: pgqueue.SchemaDefault when
	// empty.
	Schema string
	// Prefix is the path the handler is mounted under, such as
	// "/admin/queue", without a trailing slash; empty for the root. The
	// handler strips it itself (do not wrap it in http.StripPrefix) and
	// writes it into every link.
	Prefix string
	// ReadOnly hides the actions and refuses them with 403 Forbidden.
	ReadOnly bool
	// RefreshInterval is how often the overview refreshes itself:
	// DefaultRefreshInterval when zero.
	RefreshInterval time.Duration
	// Secret keys the CSRF tokens' HMAC. When nil, New draws a random one:
	// tokens then hold only as long as the process. Give every replica
	// behind one load balancer the same secret (at least 32 bytes).
	Secret []byte
}

// Handler serves the dashboard. Create it with New.
type Handler struct {
	pool     *pgxpool.Pool
	client   *pgqueue.Client
	q        *queries
	prefix   string
	readOnly bool
	refresh  time.Duration
	secret   []byte
	tmpl     map[string]*template.Template
	mux      *http.ServeMux
	static   http.Handler
	cop      *http.CrossOriginProtection
}

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// New returns a Handler reading and controlling the jobs of pool's
// database. opts may be nil.
func New(pool *pgxpool.Pool, opts *Options) (*Handler, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalidOptions)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Schema = cmp.Or(o.Schema, pgqueue.SchemaDefault)
	if o.Prefix != "" && (!strings.HasPrefix(o.Prefix, "/") || strings.HasSuffix(o.Prefix, "/")) {
		return nil, fmt.Errorf("%w: Prefix %q must start with / and not end with /", ErrInvalidOptions, o.Prefix)
	}
	if o.RefreshInterval < 0 {
		return nil, fmt.Errorf("%w: negative RefreshInterval", ErrInvalidOptions)
	}
	if o.Secret != nil && len(o.Secret) < 32 {
		return nil, fmt.Errorf("%w: Secret shorter than 32 bytes", ErrInvalidOptions)
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{Schema: o.Schema})
	if err != nil {
		return nil, fmt.Errorf("pgqueueui: %w", err)
	}
	q, err := loadQueries(o.Schema)
	if err != nil {
		return nil, err
	}
	secret := o.Secret
	if secret == nil {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	tmpl, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	h := &Handler{
		pool: pool, client: client, q: q, prefix: o.Prefix, readOnly: o.ReadOnly,
		refresh: cmp.Or(o.RefreshInterval, DefaultRefreshInterval), secret: secret, tmpl: tmpl,
		static: http.StripPrefix("/static/", http.FileServerFS(sub)),
		cop:    http.NewCrossOriginProtection(),
	}
	h.routes()
	return h, nil
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.overview)
	m.HandleFunc("GET /fragment/overview", h.overviewFragment)
	m.HandleFunc("GET /jobs", h.jobs)
	m.HandleFunc("GET /jobs/{id}", h.job)
	m.HandleFunc("GET /jobs/{id}/{action}", h.confirmJobAction)
	m.HandleFunc("POST /jobs/{id}/{action}", h.jobAction)
	m.HandleFunc("GET /queues/{action}", h.confirmQueueAction)
	m.HandleFunc("POST /queues/{action}", h.queueAction)
	m.HandleFunc("GET /queue/{name}", h.queue)
	m.HandleFunc("POST /queue/{name}/limits", h.setLimits)
	m.HandleFunc("GET /workflows", h.workflows)
	m.HandleFunc("GET /workflows/{id}", h.workflow)
	m.HandleFunc("GET /workflows/{id}/{action}", h.confirmWorkflowAction)
	m.HandleFunc("POST /workflows/{id}/{action}", h.workflowAction)
	m.HandleFunc("GET /locks", h.locks)
	m.HandleFunc("GET /periodic", h.periodic)
	m.Handle("GET /static/", h.static)
	h.mux = m
}

// ServeHTTP strips the prefix, sets the security headers and serves the
// page asked for. A path outside the prefix is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	path := r.URL.Path
	if h.prefix != "" {
		rest, ok := strings.CutPrefix(path, h.prefix)
		if !ok || (rest != "" && rest[0] != '/') {
			http.NotFound(w, r)
			return
		}
		if rest == "" {
			http.Redirect(w, r, h.prefix+"/", http.StatusMovedPermanently)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path, u.RawPath = rest, ""
		r2.URL = &u
		r = r2
	}
	h.mux.ServeHTTP(w, r)
}

// csrfToken returns the token forms must carry, setting the browser's
// cookie first if it has none: the token is the HMAC of the cookie's random
// value, so a page of another site can neither read nor forge it.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
		return h.sign(c.Value)
	}
	b := make([]byte, 32)
	rand.Read(b)
	v := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: v, Path: cmp.Or(h.prefix, "/"),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	return h.sign(v)
}

func (h *Handler) sign(v string) string {
	m := hmac.New(sha256.New, h.secret)
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// writable reports whether r may change anything, and answers 403 when
// not: never on a read-only dashboard, and a POST only with the CSRF
// token of its cookie (checkCSRF). Every action and its confirmation
// page start with it.
func (h *Handler) writable(w http.ResponseWriter, r *http.Request) bool {
	if h.readOnly {
		h.fail(w, r, http.StatusForbidden, "the dashboard is read-only")
		return false
	}
	if r.Method == http.MethodPost {
		if err := h.checkCSRF(w, r); err != nil {
			h.fail(w, r, http.StatusForbidden, err.Error())
			return false
		}
	}
	return true
}

// actionOn reads the action and the id of a request to an action on one
// job or workflow (GET: its confirmation page; POST: the action itself):
// 404 when actions has no such action or the id is not one, then
// writable's 403s. It returns the action's name in the path and its verb.
func (h *Handler) actionOn(w http.ResponseWriter, r *http.Request, actions map[string]string) (action, verb string, id int64, ok bool) {
	action = r.PathValue("action")
	verb, known := actions[action]
	id, okID := parseID(r)
	if !known || !okID {
		msg := "no such page"
		if r.Method == http.MethodPost {
			msg = "no such action"
		}
		h.fail(w, r, http.StatusNotFound, msg)
		return "", "", 0, false
	}
	return action, verb, id, h.writable(w, r)
}

// checkCSRF reports whether the POST r carries the token of its cookie and
// does not come from another origin.
func (h *Handler) checkCSRF(w http.ResponseWriter, r *http.Request) error {
	// A form here is a token, a queue name and its limits: refuse to read
	// more.
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := h.cop.Check(r); err != nil {
		return err
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) < 32 {
		return errors.New("missing CSRF cookie: reload the page and try again")
	}
	if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(h.sign(c.Value))) {
		return errors.New("invalid CSRF token: reload the page and try again")
	}
	return nil
}
