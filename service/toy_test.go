package service_test

// A third provider, written only here: the toy. Its adapter (toyPay)
// speaks a wire protocol of its own to an in-memory fake (toyFake, on an
// httptest server): JSON over HTTP for trades, refunds and bills, and a
// notification that is a form signed with HMAC-SHA256 in a header. It is
// wired by one line (service.Providers.Add) and passes the provider
// conformance suite; toycore_test.go runs the payment core through it.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/model"
	"paynotify/service"
	"paynotify/service/providertest"
)

// toySpec is the toy as the ledger knows it.
var toySpec = model.ProviderSpec{Name: "toy", Title: "Toy Pay", PayType: 9}

// toySignature is the header carrying a toy notification's signature.
const toySignature = "Toy-Signature"

// toyMerchant is the merchant the toy adapter is configured for.
const toyAccount, toyApp = "toy-merchant", "toy-app"

// toyPay is the toy's adapter (service.Adapter).
type toyPay struct {
	base, notifyURL string
	// key verifies notifications; app is the only app configured.
	key, app string
	http     *http.Client
}

func (p *toyPay) Spec() model.ProviderSpec          { return toySpec }
func (p *toyPay) Accepts(m model.PayMethod) bool    { return m == model.PayQR }
func (p *toyPay) SignsLocally(model.PayMethod) bool { return false }
func (p *toyPay) tag(err error) error               { return model.TagProvider(toySpec.Name, err) }
func toyMAC(key string, body []byte) string         { return hex.EncodeToString(hmacOf(key, body)) }
func hmacOf(key string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(body)
	return m.Sum(nil)
}
func (p *toyPay) url(format string, args ...any) string { return p.base + fmt.Sprintf(format, args...) }
func toyDay(day time.Time) string                       { return day.In(model.Beijing).Format(time.DateOnly) }

// call sends in (if any) as JSON and reads the answer into out: 404 is
// model.ErrTradeNotExist, 409 model.ErrTradeStatus, anything else not 200
// model.ErrGatewayUnknown.
func (p *toyPay) call(ctx context.Context, method, u string, in, out any) error {
	var body bytes.Buffer
	if in != nil {
		json.NewEncoder(&body).Encode(in)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, &body)
	if err != nil {
		return err
	}
	rsp, err := p.http.Do(req)
	if err != nil {
		return p.tag(fmt.Errorf("%w: toy %s: %v", model.ErrGatewayUnknown, u, err))
	}
	defer rsp.Body.Close()
	switch rsp.StatusCode {
	case http.StatusOK:
		if out == nil {
			return nil
		}
		return json.NewDecoder(rsp.Body).Decode(out)
	case http.StatusNotFound:
		return p.tag(fmt.Errorf("%w: toy %s", model.ErrTradeNotExist, u))
	case http.StatusConflict:
		return p.tag(fmt.Errorf("%w: toy %s", model.ErrTradeStatus, u))
	}
	return p.tag(fmt.Errorf("%w: toy %s: %s", model.ErrGatewayUnknown, u, rsp.Status))
}

// toyTrade is a trade on the toy's wire.
type toyTrade struct {
	OutTradeNo string     `json:"out_trade_no"`
	TradeNo    string     `json:"trade_no"`
	App        string     `json:"app"`
	Amount     string     `json:"amount"`
	Status     string     `json:"status"` // OPEN, PAID, CLOSED
	PaidAt     *time.Time `json:"paid_at"`
	NotifyURL  string     `json:"notify_url"`
}

func (p *toyPay) StartPayment(ctx context.Context, s model.PayStart) (string, error) {
	var out struct {
		PayURL string `json:"pay_url"`
	}
	err := p.call(ctx, http.MethodPost, p.url("/trades"), toyTrade{OutTradeNo: s.OutTradeNo, App: p.app,
		Amount: s.Amount.StringFixed(2), NotifyURL: p.notifyURL}, &out)
	return out.PayURL, err
}

func (p *toyPay) QueryTrade(ctx context.Context, outTradeNo string) (model.Trade, error) {
	var t toyTrade
	if err := p.call(ctx, http.MethodGet, p.url("/trades/%s", url.PathEscape(outTradeNo)), nil, &t); err != nil {
		return model.Trade{}, err
	}
	out := model.Trade{Provider: toySpec.Name, OutTradeNo: t.OutTradeNo, TradeNo: t.TradeNo, PaidAt: t.PaidAt}
	switch t.Status {
	case "OPEN":
		out.Status = model.TradeOpen
	case "PAID":
		out.Status = model.TradePaid
	case "CLOSED":
		out.Status = model.TradeClosed
	default:
		return model.Trade{}, p.tag(fmt.Errorf("%w: toy status %q", model.ErrGatewayUnknown, model.Clip(t.Status)))
	}
	var err error
	if out.Amount, err = decimal.NewFromString(t.Amount); err != nil {
		return model.Trade{}, p.tag(fmt.Errorf("%w: toy amount %q", model.ErrGatewayUnknown, model.Clip(t.Amount)))
	}
	return out, nil
}

func (p *toyPay) CloseTrade(ctx context.Context, outTradeNo string) error {
	return p.call(ctx, http.MethodPost, p.url("/trades/%s/close", url.PathEscape(outTradeNo)), nil, nil)
}

// toyRefund is a refund on the toy's wire.
type toyRefund struct {
	TradeNo   string    `json:"trade_no"`
	RequestNo string    `json:"request_no"`
	Amount    string    `json:"amount"`
	At        time.Time `json:"at"`
}

func (p *toyPay) Refund(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal, reason string) error {
	return p.call(ctx, http.MethodPost, p.url("/refunds"), toyRefund{TradeNo: tradeNo, RequestNo: outRequestNo, Amount: amount.StringFixed(2)}, nil)
}

func (p *toyPay) RefundDone(ctx context.Context, tradeNo, outRequestNo string, amount decimal.Decimal) (bool, error) {
	err := p.call(ctx, http.MethodGet, p.url("/refunds/%s", url.PathEscape(outRequestNo)), nil, nil)
	if errors.Is(err, model.ErrTradeNotExist) {
		return false, nil
	}
	return err == nil, err
}

// toyBill is a day's bill as the toy serves it: its lines, in order.
type toyBill struct{ entries []model.BillEntry }

func (b toyBill) Close() error { return nil }
func (b toyBill) BillTotals() model.BillTotals {
	var t model.BillTotals
	for _, e := range b.entries {
		t.Add(e)
	}
	return t
}
func (b toyBill) Entries(fn func(model.BillEntry) error) error {
	for _, e := range b.entries {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func (p *toyPay) TradeBill(ctx context.Context, day time.Time) (model.Bill, error) {
	var lines []model.BillEntry
	err := p.call(ctx, http.MethodGet, p.url("/bills/%s", toyDay(day)), nil, &lines)
	if errors.Is(err, model.ErrTradeNotExist) {
		return nil, fmt.Errorf("%w: toy %s", model.ErrNoBill, toyDay(day))
	}
	if err != nil {
		return nil, err
	}
	return toyBill{lines}, nil
}

// Notice verifies a toy notification (a form: id, out_trade_no, trade_no,
// amount, app, paid_at; its HMAC in Toy-Signature) and says it in the
// ledger's terms.
func (p *toyPay) Notice(_ context.Context, h http.Header, body []byte) (model.Notice, error) {
	sig, err := hex.DecodeString(h.Get(toySignature))
	if err != nil || !hmac.Equal(sig, hmacOf(p.key, body)) {
		return model.Notice{}, fmt.Errorf("%w: toy signature", model.ErrBadSignature)
	}
	f, err := url.ParseQuery(string(body))
	if err != nil {
		return model.Notice{}, fmt.Errorf("%w: toy form: %v", model.ErrInvalidNotification, err)
	}
	if f.Get("app") != p.app {
		return model.Notice{}, fmt.Errorf("%w: toy app %q", model.ErrUnknownApp, model.Clip(f.Get("app")))
	}
	amount, err := model.ParseAmount(f.Get("amount"))
	if err != nil {
		return model.Notice{}, err
	}
	paidAt, err := time.Parse(time.RFC3339Nano, f.Get("paid_at"))
	if err != nil {
		return model.Notice{}, fmt.Errorf("%w: toy paid_at %q", model.ErrInvalidNotification, model.Clip(f.Get("paid_at")))
	}
	paidAt = paidAt.UTC()
	return model.Notice{ID: f.Get("id"), Payment: model.Observation{Provider: toySpec.Name, TradeNo: f.Get("trade_no"),
		OutTradeNo: f.Get("out_trade_no"), Amount: amount, PaidAt: &paidAt, Ref: f.Get("id"), Account: toyAccount, App: f.Get("app")}}, nil
}

// Answer is the toy's reply to its notification (handler.Notifier):
// "OK", or "NO: " and why, which has the toy send it again.
func (p *toyPay) Answer(w http.ResponseWriter, status int, refused error) {
	if refused == nil {
		io.WriteString(w, "OK")
		return
	}
	w.WriteHeader(status)
	io.WriteString(w, "NO: "+refused.Error())
}

// toyFake is the toy provider, in memory, at its wire protocol.
type toyFake struct {
	key string
	srv *httptest.Server

	mu      sync.Mutex
	trades  map[string]*toyTrade // by out_trade_no
	refunds map[string]*toyRefund
	notices map[string][]byte // the signed notification body, by out_trade_no
	seq     int
}

// newToy starts a toy fake and returns it and an adapter pointed at it.
func newToy(t *testing.T) (*toyFake, *toyPay) {
	f := &toyFake{key: "toy-secret", trades: map[string]*toyTrade{}, refunds: map[string]*toyRefund{}, notices: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /trades", f.open)
	mux.HandleFunc("GET /trades/{out}", f.query)
	mux.HandleFunc("POST /trades/{out}/close", f.close)
	mux.HandleFunc("POST /refunds", f.refund)
	mux.HandleFunc("GET /refunds/{no}", f.refundQuery)
	mux.HandleFunc("GET /bills/{day}", f.bill)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f, &toyPay{base: f.srv.URL, key: f.key, app: toyApp, http: f.srv.Client()}
}

func (f *toyFake) open(w http.ResponseWriter, r *http.Request) {
	var t toyTrade
	if err := json.NewDecoder(r.Body).Decode(&t); err != nil || t.OutTradeNo == "" {
		http.Error(w, "bad trade", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if have, ok := f.trades[t.OutTradeNo]; ok {
		if have.Amount != t.Amount || have.Status != "OPEN" {
			http.Error(w, "trade exists", http.StatusConflict)
			return
		}
	} else {
		t.Status = "OPEN"
		f.trades[t.OutTradeNo] = &t
	}
	json.NewEncoder(w).Encode(map[string]string{"pay_url": f.srv.URL + "/pay/" + url.PathEscape(t.OutTradeNo)})
}

func (f *toyFake) query(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.trades[r.PathValue("out")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	json.NewEncoder(w).Encode(t)
}

func (f *toyFake) close(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.trades[r.PathValue("out")]
	switch {
	case !ok:
		http.NotFound(w, r)
	case t.Status == "PAID":
		http.Error(w, "paid", http.StatusConflict)
	default:
		t.Status = "CLOSED"
	}
}

// Pay is the buyer paying an open trade: the toy signs its notification
// (kept for Notice) and posts it to the trade's notify URL, if any.
func (f *toyFake) Pay(ctx context.Context, outTradeNo string) error {
	f.mu.Lock()
	t, ok := f.trades[outTradeNo]
	if !ok || t.Status != "OPEN" {
		f.mu.Unlock()
		return fmt.Errorf("toy: %s takes no payment", outTradeNo)
	}
	f.seq++
	now := time.Now().UTC()
	t.Status, t.TradeNo, t.PaidAt = "PAID", fmt.Sprintf("TOY%08d", f.seq), &now
	body := []byte(url.Values{"id": {fmt.Sprintf("N%08d", f.seq)}, "out_trade_no": {t.OutTradeNo}, "trade_no": {t.TradeNo},
		"amount": {t.Amount}, "app": {t.App}, "paid_at": {now.Format(time.RFC3339Nano)}}.Encode())
	f.notices[outTradeNo] = body
	to := t.NotifyURL
	f.mu.Unlock()
	if to != "" {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, to, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set(toySignature, toyMAC(f.key, body))
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("toy: notifying %s: %w", outTradeNo, err)
		}
		answer, _ := io.ReadAll(rsp.Body)
		rsp.Body.Close()
		if rsp.StatusCode != http.StatusOK || string(answer) != "OK" {
			return fmt.Errorf("toy: the notification of %s was answered %d %q: not taken", outTradeNo, rsp.StatusCode, answer)
		}
	}
	return nil
}

// Notice is outTradeNo's payment notification, edited by forgery.
func (f *toyFake) Notice(_ context.Context, outTradeNo string, forgery providertest.Forgery) (http.Header, []byte, error) {
	f.mu.Lock()
	body, ok := f.notices[outTradeNo]
	f.mu.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("toy: no notification of %s", outTradeNo)
	}
	sig := toyMAC(f.key, body)
	form, _ := url.ParseQuery(string(body))
	switch forgery {
	case providertest.BadSignature:
		sig = toyMAC("not-the-toy's", body)
	case providertest.TamperedAmount:
		form.Set("amount", "0.01")
		body = []byte(form.Encode())
	case providertest.WrongApp:
		form.Set("app", "toy-other-app")
		body = []byte(form.Encode())
		sig = toyMAC(f.key, body)
	}
	return http.Header{toySignature: {sig}}, body, nil
}

func (f *toyFake) refund(w http.ResponseWriter, r *http.Request) {
	var in toyRefund
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, "bad refund", http.StatusBadRequest)
		return
	}
	amount, err := decimal.NewFromString(in.Amount)
	if err != nil || !amount.IsPositive() {
		http.Error(w, "bad amount", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if have, ok := f.refunds[in.RequestNo]; ok {
		if have.TradeNo != in.TradeNo || have.Amount != in.Amount {
			http.Error(w, "request_no used", http.StatusConflict)
		}
		return // once per request number
	}
	var t *toyTrade
	for _, c := range f.trades {
		if c.TradeNo == in.TradeNo && c.Status == "PAID" {
			t = c
		}
	}
	if t == nil {
		http.NotFound(w, r)
		return
	}
	total := amount
	for _, x := range f.refunds {
		if x.TradeNo == in.TradeNo {
			total = total.Add(decimal.RequireFromString(x.Amount))
		}
	}
	if total.GreaterThan(decimal.RequireFromString(t.Amount)) {
		http.Error(w, "more than paid", http.StatusConflict)
		return
	}
	in.At = time.Now().UTC()
	f.refunds[in.RequestNo] = &in
}

func (f *toyFake) refundQuery(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.refunds[r.PathValue("no")]; !ok {
		http.NotFound(w, r)
	}
}

// refunded is what the toy gave back of tradeNo, and under how many
// request numbers.
func (f *toyFake) refunded(tradeNo string) (decimal.Decimal, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sum decimal.Decimal
	n := 0
	for _, x := range f.refunds {
		if x.TradeNo == tradeNo {
			sum, n = sum.Add(decimal.RequireFromString(x.Amount)), n+1
		}
	}
	return sum, n
}

func (f *toyFake) bill(w http.ResponseWriter, r *http.Request) {
	day := r.PathValue("day")
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []model.BillEntry
	for _, t := range f.trades {
		if t.PaidAt != nil && toyDay(*t.PaidAt) == day {
			a := decimal.RequireFromString(t.Amount)
			lines = append(lines, model.BillEntry{Kind: model.BillPayment, TradeNo: t.TradeNo, OutTradeNo: t.OutTradeNo,
				Amount: a, Received: a, FinishedAt: *t.PaidAt})
		}
	}
	for _, x := range f.refunds {
		if toyDay(x.At) == day {
			a := decimal.RequireFromString(x.Amount).Neg()
			var out string
			for _, t := range f.trades {
				if t.TradeNo == x.TradeNo {
					out = t.OutTradeNo
				}
			}
			lines = append(lines, model.BillEntry{Kind: model.BillRefund, TradeNo: x.TradeNo, OutTradeNo: out, OutRequestNo: x.RequestNo,
				Amount: a, Received: a, FinishedAt: x.At})
		}
	}
	if len(lines) == 0 {
		http.NotFound(w, r)
		return
	}
	slices.SortFunc(lines, func(a, b model.BillEntry) int { return a.FinishedAt.Compare(b.FinishedAt) })
	for i := range lines {
		lines[i].Line = i + 1
	}
	json.NewEncoder(w).Encode(lines)
}

// The toy passes the suite both shipped adapters pass.
func TestToyConformance(t *testing.T) {
	fake, toy := newToy(t)
	if err := (service.Providers{}).Add(toy); err != nil {
		t.Fatal(err)
	}
	providertest.Test(t, providertest.Harness{Name: toySpec.Name, Provider: toy, Notices: toy, Fake: fake,
		Method: model.PayQR, Account: toyAccount, App: toyApp})
}
