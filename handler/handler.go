// Package handler is paynotify's HTTP surface: Alipay's notify endpoint,
// the member-facing order API, health, readiness and metrics. It maps domain errors to answers through
// one table (errors.go) and never shows a client internal text.
package handler

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"paynotify/metrics"
	"paynotify/model"
	"paynotify/service"
)

// Readiness reports whether the database can serve requests now (see
// dao.Store.Ready).
type Readiness interface {
	Ready(ctx context.Context) error
}

// Deps is what the HTTP surface needs.
type Deps struct {
	Log      *slog.Logger
	Verifier Verifier
	// WeChatPay verifies WeChat Pay's notifications; nil, /wechatpay/notify
	// is off.
	WeChatPay WeChatPayVerifier
	// Notifiers are the notification endpoints of the other providers,
	// each served at POST /notify/{provider}.
	Notifiers map[model.Provider]Notifier
	Payments  *service.Payments
	Orders    *service.Orders
	// JWTSecret signs member tokens; without it the order API is off.
	JWTSecret []byte
	// AdminToken guards /admin; without it the admin views are off.
	AdminToken string
	// Queues, Dashboard and Lookup are what the admin views read; all
	// three are needed for /admin.
	Queues    *service.Queues
	Dashboard *service.Dashboard
	Lookup    *service.Lookup
	// Checkout and Refunds talk to Alipay; without them the pay and refund
	// endpoints are off.
	Checkout *service.Checkout
	Refunds  *service.Refunds
	// Console serves the operator console under /console; nil, it is off.
	Console http.Handler
	// BillReconcilers, one per configured provider account, serve the
	// reconciliation views under /admin; empty, they are off.
	BillReconcilers service.Reconcilers
	// Webhooks serves /admin/webhook-endpoints; nil, those routes are
	// off (off webhooks, no WEBHOOK_SECRET_KEY, answer 409 instead).
	Webhooks *service.Webhooks
	// Reloader serves POST /admin/reload; nil, that route is off (dev).
	Reloader Reloader
	DB       Readiness
	// Registry is what /metrics serves; Metrics counts into it (nil: New
	// defines them on Registry).
	Registry *prometheus.Registry
	Metrics  *metrics.Metrics
	// NotifyTimeout bounds the work on one notification, so a database
	// that stops answering costs Alipay a "failure", never a hang.
	NotifyTimeout time.Duration
	// APITimeout bounds one /api/v1, /admin or /console request the same way: past
	// it the client gets a 503, never a hang.
	APITimeout time.Duration
	// TrustedProxies are the proxies (IPs or CIDRs, as config.Load
	// checked TRUSTED_PROXIES) whose forwarding headers name the client;
	// empty, none is trusted and the client is the connection's address.
	// One rule for every surface: gin's ClientIP, handed to the console in
	// the request's context (model.WithClientAddr) and written on the
	// access log.
	TrustedProxies []string
}

// New returns the service's routes.
func New(d Deps) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	if d.NotifyTimeout <= 0 {
		d.NotifyTimeout = 4 * time.Second
	}
	if d.APITimeout <= 0 {
		d.APITimeout = 10 * time.Second
	}
	m := d.Metrics
	if m == nil {
		m = metrics.New(d.Registry)
	}
	r := gin.New()
	// Path values are matched escaped and handed over unescaped, so an
	// idempotency key with a "/" (a visible ASCII character) still routes.
	r.UseRawPath, r.UnescapePathValues = true, true
	// A wrong method is 405 with Allow, and it and an unknown path are
	// answered in their surface's own shape (surface.go).
	r.HandleMethodNotAllowed = true
	// gin trusts every proxy unless told: nil trusts none.
	if err := r.SetTrustedProxies(d.TrustedProxies); err != nil {
		panic("handler: TrustedProxies: " + err.Error()) // config.Load checked them
	}
	r.Use(requestID(d.Log), countRequests(m), recovery())
	r.NoRoute(noRoute)
	r.NoMethod(noMethod)

	in := intake{payments: d.Payments, refunds: d.Refunds}
	if d.Verifier != nil { // nil: Alipay is not configured
		a := &Alipay{intake: in, verifier: d.Verifier, metrics: m, timeout: d.NotifyTimeout}
		r.POST("/alipay/notify", a.Notify)
	}
	if d.WeChatPay != nil {
		w := &notifyRoute{provider: model.ProviderWechatpay, notices: d.WeChatPay, answer: answerWeChatPay,
			intake: in, metrics: m, timeout: min(d.NotifyTimeout, weChatDeadline)}
		r.POST("/wechatpay/notify", w.Notify)
	}
	for p, nf := range d.Notifiers {
		n := &notifyRoute{provider: p, notices: nf, answer: notifierAnswer(nf),
			intake: in, metrics: m, timeout: d.NotifyTimeout}
		r.POST("/notify/"+string(p), n.Notify)
	}

	routeAPI(r, d)
	routeAdmin(r, d)

	r.GET("/openapi.yaml", serveOpenAPI)

	if d.Console != nil {
		// The console's pages and actions wait on the database no longer
		// than an API request does.
		r.Any("/console", deadline(d.APITimeout), withClientAddr, gin.WrapH(d.Console))
		r.Any("/console/*path", deadline(d.APITimeout), withClientAddr, gin.WrapH(d.Console))
	}

	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	// ready is whether this instance can serve: /readyz answers it to a
	// load balancer, paynotify_ready to an alert.
	ready := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return d.DB.Ready(ctx)
	}
	m.WatchReady(ready)
	var said readiness
	r.GET("/readyz", func(c *gin.Context) {
		err := ready(c.Request.Context())
		said.log(logger(c), err)
		if err != nil {
			// What the server said of itself is ours to show; a driver's
			// error is not.
			msg := "database unreachable"
			if nr := (*model.NotReadyError)(nil); errors.As(err, &nr) {
				msg = "not ready: " + nr.Reason
			}
			c.String(http.StatusServiceUnavailable, msg)
			return
		}
		c.String(http.StatusOK, "ready")
	})
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(d.Registry, promhttp.HandlerOpts{})))
	return r
}

// readiness logs what /readyz finds when it changes: a load balancer
// probes every second or so, and a node out of the cluster for minutes
// would otherwise log a WARN line per probe.
type readiness struct {
	mu   sync.Mutex
	last string // "" while ready
}

func (r *readiness) log(log *slog.Logger, err error) {
	now := ""
	if err != nil {
		now = err.Error()
	}
	r.mu.Lock()
	changed := now != r.last
	r.last = now
	r.mu.Unlock()
	switch {
	case !changed:
	case err != nil:
		log.Warn("not ready", "err", err)
	default:
		log.Info("ready again")
	}
}

// routeAPI routes the member-facing order API under /api/v1, when a JWT
// secret and the orders are given.
func routeAPI(r *gin.Engine, d Deps) {
	if len(d.JWTSecret) > 0 && d.Orders != nil {
		o := &Orders{orders: d.Orders}
		api := r.Group("/api/v1", deadline(d.APITimeout), memberAuth(d.JWTSecret))
		keys := service.NewIdempotencyKeys(d.JWTSecret)
		issued := checkIssuedKey(keys)
		api.POST("/idempotency-keys", (&IdempotencyKeys{keys: keys}).Issue)
		api.POST("/orders", issued, o.Place)
		api.GET("/orders/:sn", o.Get)
		api.POST("/orders/:sn/cancel", o.Cancel)
		api.GET("/order-requests/:key", o.RequestStatus)
		if d.Checkout != nil {
			api.POST("/orders/:sn/pay", issued, (&Pay{checkout: d.Checkout}).Start)
		}
	}
}

// routeAdmin routes the operators' JSON API under /admin, when an admin
// token and the views are given.
func routeAdmin(r *gin.Engine, d Deps) {
	if d.AdminToken != "" && d.Queues != nil && d.Dashboard != nil && d.Lookup != nil {
		a := &Admin{queues: d.Queues, dashboard: d.Dashboard, lookup: d.Lookup, refunds: d.Refunds}
		admin := r.Group("/admin", deadline(d.APITimeout), adminAuth(d.AdminToken))
		admin.GET("/outbox", a.Outbox)
		admin.GET("/journal/totals", a.JournalTotals)
		admin.GET("/orders/:sn/refunds", a.Refunds)
		if d.Refunds != nil {
			admin.POST("/orders/:sn/refunds", a.Refund)
			// /payments/{trade_no}/refund is Alipay's, as before WeChat
			// Pay; /payments/{provider}/{trade_no}/refund names the
			// provider. gin wants one name for the first wildcard of both.
			admin.POST("/payments/:first/refund", a.RefundUnmatched)
			admin.POST("/payments/:first/:trade_no/refund", a.RefundUnmatched)
		}
		if len(d.BillReconcilers) > 0 {
			// /reconciliations/{date}… is Alipay's, as before WeChat Pay;
			// /reconciliations/{provider}/{date}… names the provider.
			h := &Reconciliations{recons: d.BillReconcilers}
			admin.GET("/reconciliations", h.List)
			admin.GET("/reconciliations/:first", h.Detail)
			admin.GET("/reconciliations/:first/:date", h.Detail)
			admin.POST("/reconciliations/:first/run", h.Run)
			admin.POST("/reconciliations/:first/:date/run", h.Run)
			admin.POST("/reconciliations/:first/items/:id/resolve", h.Resolve)
			admin.POST("/reconciliations/:first/:date/items/:id/resolve", h.Resolve)
		}
		if d.Webhooks != nil {
			routeWebhooks(admin, d.Webhooks)
		}
		if d.Reloader != nil {
			admin.POST("/reload", reload(d.Reloader))
		}
	}
}
