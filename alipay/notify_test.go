package alipay_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/handler"
	"paynotify/internal/devkey"
	"paynotify/model"
	"paynotify/service"
)

// The notifications Alipay really signed go through the whole service: a
// merchant configured with the sample's app, seller and key, holding the
// order the sample pays, answers success and applies the payment.
func TestRealSamplesApplyThroughTheService(t *testing.T) {
	appKey := devkey.Read(t, "app_private_key.pem")
	for _, s := range alipay.RealSamples(t) {
		t.Run(s.Name, func(t *testing.T) {
			daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
				ctx := context.Background()
				client, err := alipay.New(alipay.Config{
					AppID: s.Form.Get("app_id"), SellerID: s.Form.Get("seller_id"),
					AppPrivateKey: appKey, AlipayPublicKey: s.PublicKey, Production: true,
				})
				if err != nil {
					t.Fatal(err)
				}
				order, err := store.CreateOrder(ctx, s.Form.Get("out_trade_no"), 1, decimal.RequireFromString(s.Form.Get("total_amount")))
				if err != nil {
					t.Fatal(err)
				}
				h := handler.New(handler.Deps{
					Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
					Verifier: client, Payments: service.NewPayments(store), DB: store,
					Registry: prometheus.NewRegistry(),
				})
				for range 2 { // Alipay resends: the second is a duplicate
					rec := httptest.NewRecorder()
					req := httptest.NewRequest(http.MethodPost, "/alipay/notify", strings.NewReader(s.Form.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
					h.ServeHTTP(rec, req)
					if rec.Body.String() != "success" {
						t.Fatalf("answer %q, want success", rec.Body.String())
					}
				}
				got, err := store.Order(ctx, order.OrderSN)
				if err != nil || got.Status != model.OrderPaid {
					t.Fatalf("order = %+v, %v; want paid", got, err)
				}
				pays, err := store.PaymentsByOrder(ctx, order.ID)
				if err != nil || len(pays) != 1 || pays[0].State != model.PaymentApplied || pays[0].TradeNo != s.Form.Get("trade_no") {
					t.Fatalf("payments = %+v, %v; want one APPLIED", pays, err)
				}
			})
		})
	}
}
