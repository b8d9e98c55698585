package handler_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/handler"
	"paynotify/internal/devkey"
	"paynotify/service"
	"paynotify/wechatpay"
)

// statements counts what a store runs while it is on.
type statements struct {
	mu sync.Mutex
	on bool
	n  int
}

func (s *statements) record(string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on {
		s.n++
	}
}

// during is how many statements fn made the store run.
func (s *statements) during(fn func()) int {
	s.mu.Lock()
	s.on, s.n = true, 0
	s.mu.Unlock()
	fn()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = false
	return s.n
}

// paidPoster posts a paid notification of one provider, signed as that
// provider signs, and says whether it was answered success.
type paidPoster struct {
	name string
	// apps are two apps of the one merchant configured: the first pays,
	// the second names the same trade in another app.
	apps [2]string
	post func(t *testing.T, sn, tradeNo, amount, app string) (success bool, answer string)
}

// The second app of each merchant bothProviders configures.
const otherApp, otherWxApp = "2021000000000002", "wxd000000000000002"

// bothProviders is the notify surface of Alipay and WeChat Pay, two apps
// each, over store, with the duplicate cache on.
func bothProviders(tb testing.TB, store *dao.Store) *server {
	tb.Helper()
	var clients []*alipay.Client
	for _, id := range []string{appID, otherApp} {
		c, err := alipay.New(alipay.Config{AppID: id, SellerID: sellerID,
			AppPrivateKey: devkey.Read(tb, "app_private_key.pem"), AlipayPublicKey: devkey.Read(tb, "alipay_public_key.pem")})
		if err != nil {
			tb.Fatal(err)
		}
		clients = append(clients, c)
	}
	apps, err := alipay.NewApps(clients...)
	if err != nil {
		tb.Fatal(err)
	}
	wx, err := wechatpay.New(wechatpay.Config{
		MchID: wxMchID, AppID: wxAppID, AppIDs: []string{otherWxApp}, APIv3Key: wxAPIv3Key,
		MerchantPrivateKey: devkey.Read(tb, "wechatpay_merchant_private_key.pem"), MerchantSerial: "3775B6A45ACD588826D15E583A95F5DD4F2B1E2F",
		PublicKey: devkey.Read(tb, "wechatpay_public_key.pem"), PublicKeyID: wxPublicKeyID,
	})
	if err != nil {
		tb.Fatal(err)
	}
	h := handler.New(handler.Deps{
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Verifier: apps, WeChatPay: wechatpay.NewProvider(wx, ""),
		Payments: service.NewPayments(store, service.DuplicateCache(100)), DB: store, Registry: prometheus.NewRegistry(),
	})
	return &server{store: store, h: h, signKey: devkey.Read(tb, "alipay_private_key.pem")}
}

// posters post paid notices of each provider through s (bothProviders).
func posters(s *server) []paidPoster {
	return []paidPoster{
		{name: "Alipay", apps: [2]string{appID, otherApp},
			post: func(t *testing.T, sn, tradeNo, amount, app string) (bool, string) {
				code, answer := s.notify("", s.signedBody(t, with(paidForm(sn, tradeNo, amount), "app_id", app, "auth_app_id", app)))
				return code == http.StatusOK && answer == "success", fmt.Sprintf("%d %s", code, answer)
			}},
		{name: "WeChatPay", apps: [2]string{wxAppID, otherWxApp},
			post: func(t *testing.T, sn, tradeNo, amount, app string) (bool, string) {
				resource := wxPaid(sn, tradeNo, decimal.RequireFromString(amount).Shift(2).IntPart())
				resource["appid"] = app
				code, answer := postWeChatResource(t, s.h, wechatpay.EventTransactionSuccess, "transaction", resource)
				return code == http.StatusNoContent, fmt.Sprintf("%d %s", code, answer)
			}},
	}
}

// Through each provider's notify route: a duplicate is answered from
// memory (no statement) only when it names the trade's out_trade_no,
// amount and app as recorded. A notification that differs in any of them
// goes to the database, whose answer stands — a conflict (not success)
// for another order or amount, the ledger's duplicate for another app of
// the merchant. The Same case shows the cache is on.
func TestDuplicateCacheDiffersThroughBothProviders(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		stmts := &statements{}
		if err := store.Trace(stmts.record); err != nil {
			t.Fatal(err)
		}
		for i, p := range posters(bothProviders(t, store)) {
			other := mustOrder(t, store, "DC-OTHER-"+p.name, "10.00")
			for j, tc := range []struct {
				name        string
				outTradeNo  func(sn string) string
				amount, app string
				success     bool
				memory      bool
			}{
				{"Same", nil, "10.00", p.apps[0], true, true},
				{"Amount", nil, "10.01", p.apps[0], false, false},
				{"OutTradeNo", func(string) string { return other.OrderSN }, "10.00", p.apps[0], false, false},
				{"App", nil, "10.00", p.apps[1], true, false},
			} {
				t.Run(p.name+"/"+tc.name, func(t *testing.T) {
					sn := "DC-" + p.name + "-" + tc.name
					mustOrder(t, store, sn, "10.00")
					tradeNo := fmt.Sprintf("4200002026113000000000007%d%02d", i, j)
					if ok, answer := p.post(t, sn, tradeNo, "10.00", p.apps[0]); !ok {
						t.Fatalf("first notice: %s", answer)
					}
					outTradeNo := sn
					if tc.outTradeNo != nil {
						outTradeNo = tc.outTradeNo(sn)
					}
					var (
						ok     bool
						answer string
					)
					n := stmts.during(func() { ok, answer = p.post(t, outTradeNo, tradeNo, tc.amount, tc.app) })
					if ok != tc.success {
						t.Errorf("answered %s, success %v, want %v", answer, ok, tc.success)
					}
					if memory := n == 0; memory != tc.memory {
						t.Errorf("answered from memory: %v, want %v (%d statements)", memory, tc.memory, n)
					}
				})
			}
		}
	})
}

// Through each provider's notify route: a notification whose transaction
// rolled back is not remembered. Sent again it goes to the database and
// is applied there; only then is its duplicate answered from memory.
func TestDuplicateCacheRollbackThroughBothProviders(t *testing.T) {
	daotest.ForEach(t, func(t *testing.T, store *dao.Store) {
		stmts := &statements{}
		if err := store.Trace(stmts.record); err != nil {
			t.Fatal(err)
		}
		// Every outbox insert fails: the payment's transaction, which
		// inserted the payment first, rolls back at its last statement.
		fail := map[string]string{
			dao.DriverMySQL:  "CREATE TRIGGER dc_fail BEFORE INSERT ON outbox FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'rolled back by the test'",
			dao.DriverSQLite: "CREATE TRIGGER dc_fail BEFORE INSERT ON outbox BEGIN SELECT RAISE(ABORT, 'rolled back by the test'); END",
		}[store.Driver()]
		for i, p := range posters(bothProviders(t, store)) {
			t.Run(p.name, func(t *testing.T) {
				sn := "DC-RB-" + p.name
				o := mustOrder(t, store, sn, "10.00")
				tradeNo := fmt.Sprintf("4200002026113000000000008%03d", i)
				if _, err := store.SQL().ExecContext(t.Context(), fail); err != nil {
					t.Fatal(err)
				}
				if ok, answer := p.post(t, sn, tradeNo, "10.00", p.apps[0]); ok {
					t.Fatalf("with the outbox failing: %s, want a refusal", answer)
				}
				if _, err := store.SQL().ExecContext(t.Context(), "DROP TRIGGER dc_fail"); err != nil {
					t.Fatal(err)
				}
				if ps := mustPayments(t, store, o.ID); len(ps) != 0 {
					t.Fatalf("the rolled-back notice left payments %+v", ps)
				}
				var (
					ok     bool
					answer string
				)
				n := stmts.during(func() { ok, answer = p.post(t, sn, tradeNo, "10.00", p.apps[0]) })
				if !ok || n == 0 {
					t.Fatalf("sent again: %s after %d statements, want success from the database", answer, n)
				}
				if ps := mustPayments(t, store, o.ID); len(ps) != 1 {
					t.Fatalf("payments %+v, want one", ps)
				}
				n = stmts.during(func() { ok, answer = p.post(t, sn, tradeNo, "10.00", p.apps[0]) })
				if !ok || n != 0 {
					t.Errorf("third time: %s after %d statements, want success from memory", answer, n)
				}
			})
		}
	})
}
