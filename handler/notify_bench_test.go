package handler_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/fakewechatpay"
	"paynotify/internal/devkey"
	"paynotify/wechatpay"
)

// benchNotice is one notification as a provider posts it.
type benchNotice struct {
	path, contentType string
	header            http.Header
	body              []byte
}

// post sends n to h; want is the status of a success.
func (n benchNotice) post(b *testing.B, h http.Handler, want int) {
	if err := n.send(h, want); err != nil {
		b.Fatal(err)
	}
}

// send is post for any goroutine: it says what went wrong.
func (n benchNotice) send(h http.Handler, want int) error {
	req := httptest.NewRequest(http.MethodPost, n.path, bytes.NewReader(n.body))
	for k, v := range n.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", n.contentType)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != want {
		return fmt.Errorf("%s: %d %s", n.path, w.Code, w.Body)
	}
	return nil
}

// benchProviders builds a notice of each provider paying sn by trade i.
var benchProviders = []struct {
	name   string
	status int
	notice func(b *testing.B, s *server, sn string, i int) benchNotice
}{
	{"Alipay", http.StatusOK, func(b *testing.B, s *server, sn string, i int) benchNotice {
		body := s.signedBody(b, paidForm(sn, fmt.Sprintf("2026113022001400000%09d", i), "10.00"))
		return benchNotice{path: notifyPath, contentType: "application/x-www-form-urlencoded", body: []byte(body)}
	}},
	{"WeChatPay", http.StatusNoContent, func(b *testing.B, s *server, sn string, i int) benchNotice {
		// The fields a real notice carries, beside those the ledger reads.
		resource := wxPaid(sn, fmt.Sprintf("4200002026113000000%09d", i), 1000)
		resource["trade_state_desc"], resource["bank_type"], resource["attach"] = "支付成功", "OTHERS", ""
		resource["payer"] = map[string]string{"openid": "oUpF8uMuAJO_M2pxb1Q9zN000001"}
		resource["amount"].(map[string]any)["payer_currency"] = "CNY"
		plain, err := json.Marshal(resource)
		if err != nil {
			b.Fatal(err)
		}
		body, err := fakewechatpay.Body{ID: "EV-" + sn, EventType: wechatpay.EventTransactionSuccess, Summary: "支付成功",
			OriginalType: "transaction", CreateTime: time.Now(), Nonce: "0123456789ab", Resource: plain}.Seal(wxAPIv3Key)
		if err != nil {
			b.Fatal(err)
		}
		g, err := fakewechatpay.SignNotification(devkey.Read(b, "wechatpay_private_key.pem"), wxPublicKeyID, time.Now(), body)
		if err != nil {
			b.Fatal(err)
		}
		h := http.Header{}
		g.Set(h)
		return benchNotice{path: "/wechatpay/notify", contentType: "application/json", header: h, body: body}
	}},
}

// BenchmarkNotify is one notification through the whole HTTP surface
// (routing, middleware, access log, verification, the ledger), as serve
// wires it, for each provider: a duplicate of a payment this instance
// recorded (answered from memory by the duplicate cache), a first notice
// alone (one order each, applied by observeOne), and first notices 32 at
// once (in group transactions); on SQLite, and MariaDB with
// TEST_MYSQL_DSN.
func BenchmarkNotify(b *testing.B) {
	for _, driver := range daotest.Drivers {
		if driver == dao.DriverMySQL && os.Getenv("TEST_MYSQL_DSN") == "" {
			continue
		}
		store := daotest.Open(b, driver)
		s := bothProviders(b, store)
		next := 1000 // the trade number of the next first notice
		for pi, p := range benchProviders {
			b.Run(driver+"/"+p.name+"/Duplicate", func(b *testing.B) {
				sn := fmt.Sprintf("BD-%s-%s", driver, p.name)
				mustOrder(b, store, sn, "10.00")
				n := p.notice(b, s, sn, pi)
				n.post(b, s.h, p.status)
				b.ReportAllocs()
				for b.Loop() {
					n.post(b, s.h, p.status)
				}
			})
			b.Run(driver+"/"+p.name+"/First", func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					b.StopTimer()
					next++
					sn := fmt.Sprintf("BF-%s-%s-%d", driver, p.name, next)
					mustOrder(b, store, sn, "10.00")
					n := p.notice(b, s, sn, next)
					b.StartTimer()
					n.post(b, s.h, p.status)
				}
			})
			b.Run(driver+"/"+p.name+"/FirstAt32", func(b *testing.B) {
				// Thirty-two at once, as bench's c=32: first notices join
				// group transactions (dao/groupsql.go).
				notices := make([]benchNotice, b.N)
				for i := range notices {
					next++
					sn := fmt.Sprintf("BG-%s-%s-%d", driver, p.name, next)
					mustOrder(b, store, sn, "10.00")
					notices[i] = p.notice(b, s, sn, next)
				}
				var at atomic.Int64
				b.SetParallelism(16)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := notices[at.Add(1)-1].send(s.h, p.status); err != nil {
							b.Error(err) // not Fatal: this is not the benchmark's goroutine
							return
						}
					}
				})
			})
		}
	}
}
