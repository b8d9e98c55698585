package handler_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/handler"
	"paynotify/model"
	"paynotify/service"
)

// plainPay is a provider the handler has no route of its own for: its
// notice is a form (id, out_trade_no, trade_no, amount, app) signed with
// HMAC-SHA256 in Plain-Signature, its answer "OK", or "NO: " and why.
type plainPay struct{ key string }

var plainSpec = model.ProviderSpec{Name: "plainpay", Title: "Plain Pay", PayType: 8}

func (p plainPay) sign(body string) string {
	m := hmac.New(sha256.New, []byte(p.key))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func (p plainPay) Notice(_ context.Context, h http.Header, body []byte) (model.Notice, error) {
	if !hmac.Equal([]byte(h.Get("Plain-Signature")), []byte(p.sign(string(body)))) {
		return model.Notice{}, fmt.Errorf("%w: plain signature", model.ErrBadSignature)
	}
	f, err := url.ParseQuery(string(body))
	if err != nil {
		return model.Notice{}, fmt.Errorf("%w: %v", model.ErrInvalidNotification, err)
	}
	if f.Get("app") != "plain-app" {
		return model.Notice{}, fmt.Errorf("%w: app %q", model.ErrUnknownApp, model.Clip(f.Get("app")))
	}
	amount, err := model.ParseAmount(f.Get("amount"))
	if err != nil {
		return model.Notice{}, fmt.Errorf("%w: amount: %v", model.ErrInvalidNotification, err)
	}
	at := time.Now().UTC()
	return model.Notice{ID: f.Get("id"), Payment: model.Observation{Provider: plainSpec.Name, TradeNo: f.Get("trade_no"),
		OutTradeNo: f.Get("out_trade_no"), Amount: amount, PaidAt: &at, Ref: f.Get("id"), App: f.Get("app")}}, nil
}

func (p plainPay) Answer(w http.ResponseWriter, status int, refused error) {
	if refused == nil {
		io.WriteString(w, "OK")
		return
	}
	w.WriteHeader(status)
	io.WriteString(w, "NO: "+refused.Error())
}

// A provider with no route of its own is served at POST /notify/{name}
// once its adapter is a handler.Notifier: a genuine notice racing itself
// pays its order once and every delivery is answered in the provider's
// words; forged, foreign or malformed ones are refused in them and
// change nothing.
func TestNotifierRoute(t *testing.T) {
	if err := model.RegisterProvider(plainSpec); err != nil { // service.Providers.Add's part
		t.Fatal(err)
	}
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		ctx := context.Background()
		plain := plainPay{key: "plain-secret"}
		h := handler.New(handler.Deps{
			Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
			Payments: service.NewPayments(store), DB: store, Registry: prometheus.NewRegistry(),
			Notifiers: map[model.Provider]handler.Notifier{plainSpec.Name: plain},
		})
		post := func(body, sig string) (int, string) {
			req := httptest.NewRequest(http.MethodPost, "/notify/plainpay", strings.NewReader(body))
			req.Header.Set("Plain-Signature", sig)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Code, rec.Body.String()
		}
		order, err := store.CreateOrder(ctx, "PN-1", 1, decimal.RequireFromString("10.00"))
		if err != nil {
			t.Fatal(err)
		}
		notice := func(kv ...string) string {
			f := url.Values{"id": {"N1"}, "out_trade_no": {"PN-1"}, "trade_no": {"PLAIN-1"}, "amount": {"10.00"}, "app": {"plain-app"}}
			for i := 0; i+1 < len(kv); i += 2 {
				f.Set(kv[i], kv[i+1])
			}
			return f.Encode()
		}
		for _, c := range []struct{ name, body, sig string }{
			{"BadSignature", notice(), plain.sign(notice()) + "00"},
			{"TamperedAmount", notice("amount", "0.01"), plain.sign(notice())},
			{"UnknownApp", notice("app", "other-app"), plain.sign(notice("app", "other-app"))},
			{"BadAmount", notice("amount", "10.001"), plain.sign(notice("amount", "10.001"))},
		} {
			t.Run(c.name, func(t *testing.T) {
				if code, body := post(c.body, c.sig); code < 400 || !strings.HasPrefix(body, "NO: ") || strings.Contains(body, "plain-secret") {
					t.Fatalf("answer %d %q; want a refusal in the provider's words", code, body)
				}
				if pays, err := store.PaymentsByOrder(ctx, order.ID); err != nil || len(pays) != 0 {
					t.Fatalf("payments %+v, %v; want none", pays, err)
				}
			})
		}
		var wg sync.WaitGroup
		answers := make([]string, 8)
		for i := range answers {
			wg.Go(func() {
				code, body := post(notice(), plain.sign(notice()))
				answers[i] = fmt.Sprint(code, " ", body)
			})
		}
		wg.Wait()
		for _, a := range answers {
			if a != "200 OK" {
				t.Fatalf("answers %q; want every delivery answered 200 OK", answers)
			}
		}
		got, err := store.Order(ctx, "PN-1")
		if err != nil {
			t.Fatal(err)
		}
		pays, err := store.PaymentsByOrder(ctx, order.ID)
		if err != nil || len(pays) != 1 || pays[0].State != model.PaymentApplied || pays[0].Provider != plainSpec.Name ||
			got.Status != model.OrderPaid || got.PayType != plainSpec.PayType {
			t.Fatalf("order %+v, payments %+v, %v; want paid once through plainpay", got, pays, err)
		}
	})
}
