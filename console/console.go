// Package console is the operator console under /console: server-rendered
// pages (html/template, assets embedded) to see every payment's story and
// work the exception queues. Operators sign in by name; every change goes
// through the same service code as the admin API and is written to
// admin_audit in the transaction that makes it.
//
// Every page works without JavaScript: the one chart is an SVG drawn on
// the server.
package console

import (
	"embed"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"paynotify/metrics"
	"paynotify/service"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Prefix is where the console is served.
const Prefix = "/console"

// Deps is what the console needs.
type Deps struct {
	Log *slog.Logger
	// Dashboard, Queues and Lookup are what the pages read.
	Dashboard *service.Dashboard
	Queues    *service.Queues
	Lookup    *service.Lookup
	Sessions  *service.Sessions
	// Refunds does the refund actions; without it they are not offered.
	Refunds *service.Refunds
	// BillReconcilers resolve reconciliation items, each its provider
	// account's (the configured ones); without any the resolve action is
	// not offered, and an item of a provider not among them is refused.
	BillReconcilers service.Reconcilers
	// Webhooks manages the webhook endpoints; without it the webhook
	// pages are not served.
	Webhooks *service.Webhooks
	// Operators maps each operator's name to their bcrypt hash.
	Operators map[string]string
	// AdminToken, when no operator is configured, signs in one operator
	// named "admin" with the token as password.
	AdminToken string
	// SecureCookies marks the session cookie Secure even for a request
	// that arrived over plain HTTP (TLS ends at a proxy that does not say
	// X-Forwarded-Proto).
	SecureCookies bool
	// PublicHost is the host the console is reached at from outside
	// (PUBLIC_URL's), accepted as a form's Origin behind a proxy that
	// rewrites Host.
	PublicHost string
	// Metrics holds this instance's notification counts (duplicates and
	// failures leave no row in the ledger).
	Metrics *metrics.Metrics
	// Now is the clock (tests).
	Now func() time.Time
}

// Console serves the operator console.
type Console struct {
	d       Deps
	pages   *pages
	limiter *limiter
	// dummyHash stands in for an unknown operator's (dummyHashFor).
	dummyHash []byte
	mux       *http.ServeMux
}

// New returns the console's handler, to be mounted at Prefix.
func New(d Deps) (*Console, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{d: d, pages: p, limiter: newLimiter(d.Now), dummyHash: dummyHashFor(d.Operators), mux: http.NewServeMux()}
	c.routes()
	return c, nil
}

// Enabled reports whether anyone could sign in.
func (d Deps) Enabled() bool { return len(d.Operators) > 0 || d.AdminToken != "" }

func (c *Console) routes() {
	m := c.mux
	m.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix, http.FileServerFS(staticFiles)))
	m.HandleFunc("GET "+Prefix+"/login", c.loginPage)
	m.HandleFunc("POST "+Prefix+"/login", c.login)
	m.HandleFunc("GET "+Prefix+"/{$}", c.signedIn(c.overview))
	m.HandleFunc("GET "+Prefix+"/search", c.signedIn(c.search))
	m.HandleFunc("GET "+Prefix+"/orders/{sn}", c.signedIn(c.timeline))
	m.HandleFunc("GET "+Prefix+"/payments/{trade_no}", c.signedIn(c.payment))
	m.HandleFunc("GET "+Prefix+"/payments/{provider}/{trade_no}", c.signedIn(c.payment))
	m.HandleFunc("GET "+Prefix+"/queues/refunds", c.signedIn(c.refundQueue))
	m.HandleFunc("GET "+Prefix+"/queues/outbox", c.signedIn(c.outboxQueue))
	m.HandleFunc("GET "+Prefix+"/reconciliations/{provider}/{date}", c.signedIn(c.reconRun))
	m.HandleFunc("GET "+Prefix+"/audit", c.signedIn(c.auditLog))
	m.HandleFunc("POST "+Prefix+"/logout", c.changing(c.logout))
	m.HandleFunc("POST "+Prefix+"/zone", c.changing(c.setZone))
	c.actionRoutes()
	c.webhookRoutes()
}

// ServeHTTP serves a console request with the headers every page carries.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Nothing from elsewhere: no script at all, styles and images from the
	// console only, forms post only to it, no framing.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer Chrome posts forms
	// with "Origin: null", and the origin check needs the real one. Other
	// sites still never see a console URL.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if r.URL.Path == Prefix {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	if _, pattern := c.mux.Handler(r); pattern == "" {
		c.unrouted(w, r)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// unrouted answers a path the console does not have, or a method it does
// not take there (405 with Allow), with the console's own page rather
// than the mux's plain text.
func (c *Console) unrouted(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := c.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		c.status(w, r, http.StatusNotFound, "No such page.")
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	c.status(w, r, http.StatusMethodNotAllowed, "This page does not take "+r.Method+".")
}
