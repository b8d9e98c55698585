package console

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"time"
	_ "time/tzdata" // the operator's zone, even on an image without zoneinfo

	"github.com/shopspring/decimal"

	"paynotify/model"
	"paynotify/service"
)

// Currency is the currency every amount is in (Alipay settles CNY).
const Currency = "CNY"

// Zones offered in the zone picker; any IANA name is accepted.
var Zones = []string{"Asia/Shanghai", "UTC", "Asia/Hong_Kong", "Asia/Singapore", "Asia/Tokyo", "Europe/London", "Europe/Berlin", "America/New_York", "America/Los_Angeles"}

// pages holds one template set per page, each with the layout.
type pages struct {
	sets map[string]*template.Template
}

func parsePages() (*pages, error) {
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := &pages{sets: map[string]*template.Template{}}
	for _, f := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "templates/"), ".html")
		if name == "layout" || name == "parts" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html", f)
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", name, err)
		}
		p.sets[name] = t
	}
	return p, nil
}

// funcs are the helpers templates use; formatting that needs the
// operator's zone is a method of page.
var funcs = template.FuncMap{
	// amountPattern is the API's amount rule for an input's pattern.
	"amountPattern": func() string { return model.AmountPattern },
	"money":         money,
	"orderLink":     orderLink,
	"payLink":       payLink,
	"runLink":       runLink,
	"runDayLink":    runDayLink,
	"outcomeLink":   outcomeLink,
	"words":         words,
	"targetRun":     targetRun,
	"providerName":  model.Provider.Name,
	"status":        func(s model.OrderStatus) string { return s.String() },
	"outcome":       func(p model.Payment) string { return label(model.OutcomeOf(p.State, p.Reason)) },
	"lower":         strings.ToLower,
	"label":         label,
	"add":           func(a, b int) int { return a + b },
	"sub":           func(a, b int) int { return a - b },
	"dict":          dict,
	"keySuffix":     keySuffix,
}

// labels are the words a page shows for a state, a decision or an
// outcome; the enum itself stays in the badge's title, as the API and the
// logs write it.
var labels = map[string]string{
	"REFUND_PENDING":   "owed back",
	"refund_pending":   "owed back",
	"REFUND_FAILED":    "refund failed",
	"UNMATCHED":        "unmatched (no order)",
	"unmatched":        "unmatched (no order)",
	"AWAITING_PAYMENT": "awaiting payment",
	// Why a payment is owed back.
	"ALREADY_PAID":    "order already paid",
	"AMOUNT_MISMATCH": "amount differs from the order's",
	"ORDER_CLOSED":    "order closed",
	// Refund kinds.
	"AUTO":       "owed back",
	"AFTER_SALE": "after-sale",
	"CONSOLE":    "provider's console",
}

// label is how a page says v (a state, a decision, an outcome): its words
// from labels, or the enum in lower case, in words.
func label(v any) string {
	s := fmt.Sprint(v)
	if l, ok := labels[s]; ok {
		return l
	}
	return strings.ReplaceAll(strings.ToLower(s), "_", " ")
}

// keySuffix makes one form's key out of its page's: a page with a form
// per row gives each row's form a key of its own, so resolving one row
// never counts as a second post of another's form.
func keySuffix(row any) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(row)))
	return "-" + hex.EncodeToString(sum[:])[:15]
}

// formKey is a page's one-time key for the forms it shows (32 hex digits,
// leaving room for a keySuffix within model.ValidActKey's 64).
func formKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}

// dict builds a map from key, value pairs, to hand a sub-template more
// than one value.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, errors.New("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, errors.New("dict: keys must be strings")
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// page is what every page shows around its content.
type page struct {
	Title    string
	Operator string
	CSRF     string
	Zone     string
	Zones    []string
	Path     string
	Flash    string
	// Key is this page's one-time key for the forms it shows: posting one
	// twice does its work once.
	Key string
	loc *time.Location
	now time.Time
}

func (c *Console) page(r *http.Request, title string) page {
	ses := session(r)
	zone := ses.TimeZone
	if zone == "" {
		zone = service.DefaultZone
	}
	loc, err := loadZone(zone)
	if err != nil {
		loc, zone = time.UTC, "UTC"
	}
	return page{Title: title, Operator: ses.Operator, CSRF: ses.CSRFToken, Zone: zone, Zones: Zones,
		Path: r.URL.RequestURI(), Flash: flashes[r.URL.Query().Get("done")], Key: formKey(), loc: loc, now: c.d.Now()}
}

// Time shows t in the operator's zone, with UTC on hover.
func (p page) Time(t time.Time) template.HTML {
	if t.IsZero() {
		return ""
	}
	u := t.UTC()
	return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s UTC">%s</time>`,
		u.Format(time.RFC3339), u.Format("2006-01-02 15:04:05"), t.In(p.loc).Format("2006-01-02 15:04:05")))
}

// signedInUntil starts the after-state of a sign-in's audit row, which
// ends with the session's expiry in RFC 3339 (UTC).
const signedInUntil = "signed in until "

// After shows an audit row's after-state; a sign-in's expiry is a time,
// shown like every other time.
func (p page) After(a model.Audit) template.HTML {
	if rest, ok := strings.CutPrefix(a.After, signedInUntil); ok && a.Action == model.AuditSignIn {
		if t, err := time.Parse(time.RFC3339, rest); err == nil {
			return template.HTML(signedInUntil) + p.Time(t)
		}
	}
	return template.HTML(template.HTMLEscapeString(words(a.After)))
}

// enumToken is a state or reason as stored (REFUND_PENDING, ALREADY_PAID).
var enumToken = regexp.MustCompile(`\b[A-Z][A-Z_]{2,}\b`)

// plainEnums are the states whose words are the enum in lower case.
var plainEnums = map[string]bool{
	string(model.RefundRefunding): true, string(model.RefundRefunded): true, string(model.PaymentApplied): true,
	string(model.OutboxPending): true, string(model.OutboxSent): true, string(model.OutboxFailed): true,
	string(model.ReconDone): true, string(model.ReconRunning): true,
}

// words says the enums in an audit row's before or after in words:
// "REFUND_PENDING ALREADY_PAID" is "owed back (order already paid)".
func words(s string) string {
	out := enumToken.ReplaceAllStringFunc(s, func(t string) string {
		if _, ok := labels[t]; ok || plainEnums[t] || model.ReconOutcome(t).Valid() {
			return label(t)
		}
		return t // a provider's code (ACQ.SYSTEM_ERROR), a name: as it is
	})
	// A state followed by its reason reads as the state (the reason).
	for _, r := range []model.RefundReason{model.RefundAlreadyPaid, model.RefundAmountMismatch, model.RefundOrderClosed} {
		out = strings.ReplaceAll(out, " "+label(r), " ("+label(r)+")")
	}
	return out
}

// TimeP shows an optional time.
func (p page) TimeP(t *time.Time) template.HTML {
	if t == nil {
		return "—"
	}
	return p.Time(*t)
}

// Age says how long ago t was, roughly.
func (p page) Age(t *time.Time) string {
	if t == nil {
		return "—"
	}
	d := p.now.Sub(*t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// money shows an amount with two decimals, thousands grouped, and the
// currency.
func money(d decimal.Decimal) string {
	s := d.StringFixed(2)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String() + "." + frac + " " + Currency
	if neg {
		out = "−" + out
	}
	return out
}

func loadZone(name string) (*time.Location, error) {
	if name == "" || len(name) > 64 || strings.Contains(name, "..") {
		return nil, errors.New("bad zone")
	}
	return time.LoadLocation(name)
}

// orderLink is the timeline of an order.
func orderLink(sn string) string { return Prefix + "/orders/" + pathEscape(sn) }

// payLink is the page of a payment: /payments/{provider}/{trade_no}, or
// /payments/{trade_no} for model.DefaultProvider's, as before WeChat Pay.
func payLink(p model.Provider, tradeNo string) string {
	if p.OrDefault() == model.DefaultProvider {
		return Prefix + "/payments/" + pathEscape(tradeNo)
	}
	return Prefix + "/payments/" + pathEscape(string(p)) + "/" + pathEscape(tradeNo)
}

// pathEscape escapes an id for a path segment.
func pathEscape(s string) string {
	return strings.ReplaceAll(template.URLQueryEscaper(s), "+", "%20")
}

// flashes are the messages a redirect after an action may show, by code.
var flashes = map[string]string{
	"retried":          "The refund is queued again: the worker asks its provider on its next round.",
	"resolved":         "Resolved, with your note.",
	"refunded":         "Refund recorded: the worker sends it to its provider on its next round.",
	"requeued":         "The event is queued again: the relay publishes it on its next round.",
	"ran":              "Reconciled now: the run below is how it ended.",
	"running":          "Reconciliation started; a big day goes on in the background — reload to see how it ends.",
	"already":          "Nothing done: this form was submitted before, and that submission did it.",
	"signedout":        "Signed out.",
	"webhook-updated":  "Endpoint changed.",
	"webhook-enabled":  "Endpoint enabled: it receives the events committed from now on.",
	"webhook-disabled": "Endpoint disabled: its waiting deliveries failed, and nothing more is sent to it.",
	"webhook-deleted":  "Endpoint deleted, with its deliveries and their attempts.",
	"webhook-tested":   "A webhook.test delivery is queued: see it below in a moment.",
	"webhook-resent":   "Delivery queued again: the same body under the same webhook-id.",
}

// render writes a page, or a 500 if its template fails (rendered to a
// buffer first, so a half page never goes out).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	t := c.pages.sets[name]
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		c.d.Log.Error("console template failed", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type statusData struct {
	page
	Code    int
	Message string
	// Back, if set, is the page the failed action was about (BackTo names
	// it), linked besides the overview.
	Back, BackTo string
}

// status shows a short message page.
func (c *Console) status(w http.ResponseWriter, r *http.Request, code int, msg string) {
	c.render(w, r, code, "status", statusData{page: c.page(r, http.StatusText(code)), Code: code, Message: msg})
}

// fail answers an error: domain errors with their own words, anything
// else logged once and shown as an internal error.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	c.failAbout(w, r, err, "", "")
}

// failAbout is fail with a link back to the page the action was about
// (back, named by backTo: "the payment").
func (c *Console) failAbout(w http.ResponseWriter, r *http.Request, err error, back, backTo string) {
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			msg := row.msg
			if row.status >= http.StatusInternalServerError {
				c.d.Log.Warn("console request failed", "request_id", w.Header().Get("X-Request-Id"), "path", r.URL.Path, "err", err)
			}
			if msg == "" {
				msg = words(err.Error()) // "refund … is refunding", not REFUNDING
			}
			c.render(w, r, row.status, "status", statusData{page: c.page(r, http.StatusText(row.status)), Code: row.status, Message: msg,
				Back: back, BackTo: backTo})
			return
		}
	}
	// The request's id is the one the service's middleware answered
	// with (X-Request-Id), so this line and the access log's meet.
	c.d.Log.Error("console request failed", "request_id", w.Header().Get("X-Request-Id"), "path", r.URL.Path, "err", err)
	c.status(w, r, http.StatusInternalServerError, "Something went wrong; it is in the log.")
}

// errorTable maps domain errors to pages. An empty msg shows the error's
// own text (ours, never a driver's).
var errorTable = []struct {
	err    error
	status int
	msg    string
}{
	{model.ErrOrderNotFound, http.StatusNotFound, "No such order."},
	{model.ErrPaymentNotFound, http.StatusNotFound, "No such payment."},
	{model.ErrRefundNotFound, http.StatusNotFound, "No such refund."},
	{model.ErrEventNotFound, http.StatusNotFound, "No such event."},
	{model.ErrItemNotFound, http.StatusNotFound, "No such reconciliation item."},
	{model.ErrRunNotFound, http.StatusNotFound, "No reconciliation run of that provider's bill of that date."},
	{model.ErrProviderOff, http.StatusUnprocessableEntity, ""},
	{model.ErrNotUnmatched, http.StatusConflict, ""},
	{model.ErrInvalidRequest, http.StatusBadRequest, ""},
	{model.ErrNotActionable, http.StatusConflict, ""},
	{model.ErrRunPurged, http.StatusConflict, ""},
	{model.ErrNothingToRefund, http.StatusConflict, ""},
	{model.ErrRefundTooLarge, http.StatusUnprocessableEntity, ""},
	{model.ErrIdempotencyKeyReused, http.StatusUnprocessableEntity, ""},
	{model.ErrRetryable, http.StatusConflict, "Someone else was changing the same order. Try again."},
	{model.ErrUnavailable, http.StatusServiceUnavailable, "The database is unavailable. Try again."},
	{model.ErrEndpointNotFound, http.StatusNotFound, "No such webhook endpoint."},
	{model.ErrDeliveryNotFound, http.StatusNotFound, "No such delivery of that endpoint."},
	{model.ErrURLRefused, http.StatusBadRequest, ""},
	{model.ErrWebhooksOff, http.StatusConflict, ""},
}

// randomToken is 32 random bytes, hex.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}

// paymentKey is the provider a payment route names: {provider}, or
// model.DefaultProvider for the form without it. A name no provider has
// is kept, and finds no payment.
func paymentKey(r *http.Request) model.Provider {
	if p := r.PathValue("provider"); p != "" {
		return model.Provider(p)
	}
	return model.DefaultProvider
}
