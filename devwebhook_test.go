package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What a newcomer sees: dev's banner names the demo webhook endpoint, and
// replaying the README's first notification has dev's in-process receiver
// print the order.paid delivery it verified with the official Standard
// Webhooks library, then its body. A second dev on the kept database
// points the same endpoint at its own receiver, with a new secret, and
// verifies there too.
func TestDevDeliversWebhooksToItsReceiver(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	form, err := os.ReadFile(filepath.Join("testdata", "notify", "01_pay_demo_1001.form"))
	if err != nil {
		t.Fatal(err)
	}
	verified := regexp.MustCompile(`(?m)^\[listen\] verified (\S+) order\.paid\n\[listen\] (\{.*\})$`)
	replay := func(t *testing.T, args ...string) string {
		t.Helper()
		base, logs := start(t, append([]string{"dev", "-db", db}, args...), []string{"ALIPAY_JOBS_INTERVAL=1h"})
		banner := regexp.MustCompile(`Every event goes, signed, to webhook endpoint 1 \(http://127\.0\.0\.1:\d+/, a paynotify listen in dev\)`)
		if !banner.MatchString(logs.String()) {
			t.Errorf("dev's banner does not name the demo webhook endpoint:\n%s", logs)
		}
		post(t, base+"/alipay/notify", strings.TrimSpace(string(form)))
		deadline := time.Now().Add(30 * time.Second)
		for !verified.MatchString(logs.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("no verified order.paid delivery in dev's output:\n%s", logs)
			}
			time.Sleep(50 * time.Millisecond) // poll interval
		}
		m := verified.FindStringSubmatch(logs.String())
		var body struct {
			Type string `json:"type"`
			Data struct {
				OutTradeNo string `json:"out_trade_no"`
				OrderSN    string `json:"order_sn"`
				Sequence   int64  `json:"sequence"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(m[2]), &body); err != nil {
			t.Fatalf("the body after the verified line: %v\n%s", err, m[2])
		}
		if body.Type != "order.paid" || body.Data.Sequence <= 0 {
			t.Errorf("delivered body %s", m[2])
		}
		if strings.Contains(logs.String(), "[listen] refused") {
			t.Errorf("the receiver refused a delivery:\n%s", logs)
		}
		return m[1]
	}
	var first string
	t.Run("Fresh", func(t *testing.T) { first = replay(t) })
	t.Run("Kept", func(t *testing.T) {
		// The kept database has DEMO-1001 paid, so its replay announces
		// nothing new: the endpoint's test delivery shows the new secret.
		base, logs := start(t, []string{"dev", "-db", db, "-keep"}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
		if !strings.Contains(logs.String(), "webhook endpoint 1 (") {
			t.Errorf("dev -keep made another demo endpoint:\n%s", logs)
		}
		req, err := http.NewRequest(http.MethodPost, base+"/admin/webhook-endpoints/1/test", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+devAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("POST /admin/webhook-endpoints/1/test: %d", resp.StatusCode)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(logs.String(), " webhook.test\n[listen] {") {
			if time.Now().After(deadline) {
				t.Fatalf("no verified webhook.test delivery in dev -keep's output:\n%s", logs)
			}
			time.Sleep(50 * time.Millisecond) // poll interval
		}
	})
	if first == "" {
		t.Fatal("no webhook-id")
	}
}
