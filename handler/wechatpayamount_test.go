package handler_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakewechatpay"
	"paynotify/handler"
	"paynotify/internal/devkey"
	"paynotify/service"
	"paynotify/wechatpay"
)

// The development merchant of WeChat Pay, as testdata/dev has its keys.
const (
	wxMchID, wxAppID = "1900000001", "wxd000000000000001"
	wxAPIv3Key       = "paynotify-dev-apiv3-key-32bytes!"
	wxPublicKeyID    = "PUB_KEY_ID_0119000000000001"
)

// newWeChatServer is the real HTTP surface with WeChat Pay's notify route,
// verifying with the development keys, over store.
func newWeChatServer(tb testing.TB, store *dao.Store) http.Handler {
	tb.Helper()
	client, err := wechatpay.New(wechatpay.Config{
		MchID: wxMchID, AppID: wxAppID, APIv3Key: wxAPIv3Key,
		MerchantPrivateKey: devkey.Read(tb, "wechatpay_merchant_private_key.pem"), MerchantSerial: "3775B6A45ACD588826D15E583A95F5DD4F2B1E2F",
		PublicKey: devkey.Read(tb, "wechatpay_public_key.pem"), PublicKeyID: wxPublicKeyID,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return handler.New(handler.Deps{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), WeChatPay: wechatpay.NewProvider(client, ""),
		Payments: service.NewPayments(store), DB: store, Registry: prometheus.NewRegistry(),
	})
}

// postWeChatResource seals resource as a notification of event, signs it
// now as WeChat Pay does and posts it.
func postWeChatResource(tb testing.TB, h http.Handler, event, originalType string, resource map[string]any) (int, string) {
	tb.Helper()
	plain, err := json.Marshal(resource)
	if err != nil {
		tb.Fatal(err)
	}
	body, err := fakewechatpay.Body{ID: "EV-amount", EventType: event, Summary: "支付成功", OriginalType: originalType,
		CreateTime: time.Now(), Nonce: "0123456789ab", Resource: plain}.Seal(wxAPIv3Key)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := fakewechatpay.SignNotification(devkey.Read(tb, "wechatpay_private_key.pem"), wxPublicKeyID, time.Now(), body)
	if err != nil {
		tb.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/wechatpay/notify", bytes.NewReader(body))
	g.Set(req.Header)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func wxPaid(sn, transactionID string, fen int64) map[string]any {
	return map[string]any{
		"appid": wxAppID, "mchid": wxMchID, "out_trade_no": sn, "transaction_id": transactionID,
		"trade_type": "NATIVE", "trade_state": "SUCCESS", "success_time": time.Now().Format(time.RFC3339),
		"amount": map[string]any{"total": fen, "payer_total": fen, "currency": "CNY"},
	}
}

// TestWeChatPayNotifyAmountBound: a signed payment of more than one
// payment may be (10^10 fen and a fen, 10^12, 2^63-1) is refused 400
// {"code":"FAIL"} with nothing written — on SQLite, where 2^63-1 fen was
// booked as 92233720368547758.07, and on MariaDB, where it overflowed the
// column — and so is a refund notice of such an amount; the most one may
// be is applied.
func TestWeChatPayNotifyAmountBound(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		h := newWeChatServer(t, store)
		o := mustOrder(t, store, "WX-BIG", "100000000.00")
		for i, fen := range []int64{10_000_000_001, 1_000_000_000_000, math.MaxInt64} {
			code, body := postWeChatResource(t, h, wechatpay.EventTransactionSuccess, "transaction",
				wxPaid("WX-BIG", "42000020261130000000000090"+string(rune('0'+i)), fen))
			if code != http.StatusBadRequest || !strings.Contains(body, `"code":"FAIL"`) {
				t.Errorf("%d fen: %d %s, want 400 FAIL", fen, code, body)
			}
		}
		code, body := postWeChatResource(t, h, "REFUND.SUCCESS", "refund", map[string]any{
			"mchid": wxMchID, "out_trade_no": "WX-BIG", "transaction_id": "4200002026113000000000009000",
			"out_refund_no": "RF-WX-BIG", "refund_status": "SUCCESS",
			"amount": map[string]any{"total": int64(math.MaxInt64), "refund": int64(math.MaxInt64)},
		})
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":"FAIL"`) {
			t.Errorf("refund notice of 2^63-1 fen: %d %s, want 400 FAIL", code, body)
		}
		for _, q := range []string{"SELECT COUNT(*) FROM oms_order_payment", "SELECT COUNT(*) FROM outbox"} {
			var n int
			if err := store.SQL().QueryRow(q).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("refused notifications left %d rows: %s", n, q)
			}
		}
		if code, body := postWeChatResource(t, h, wechatpay.EventTransactionSuccess, "transaction",
			wxPaid("WX-BIG", "4200002026113000000000009009", 10_000_000_000)); code != http.StatusNoContent {
			t.Fatalf("the most one payment may be: %d %s, want 204", code, body)
		}
		if p := mustPayments(t, store, o.ID); len(p) != 1 || p[0].Amount.StringFixed(2) != "100000000.00" {
			t.Fatalf("payments %+v", p)
		}
	})
}
