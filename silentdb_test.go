package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/model"
)

// freezeProxy forwards TCP to a database until frozen; then it holds every
// byte, like a database host that stops answering without closing anything.
type freezeProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(func() { ln.Close(); p.setFrozen(false) })
	go p.accept()
	return p
}

func (p *freezeProxy) setFrozen(f bool) {
	p.mu.Lock()
	p.frozen = f
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *freezeProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				return
			}
			defer up.Close()
			go p.pipe(up, c)
			p.pipe(c, up)
		}()
	}
}

// pipe copies src to dst, holding each chunk while the proxy is frozen.
func (p *freezeProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A database that goes silent — connections open, nothing answered — costs
// Alipay a "failure" within the notify deadline, never a hang, and /readyz
// says not ready. When it answers again, the resend applies normally.
func TestSilentDatabaseFailsFastAndRecovers(t *testing.T) {
	dsn := daotest.MySQLDatabase(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newFreezeProxy(t, cfg.Addr)
	cfg.Addr = proxy.ln.Addr().String()

	appKey, _ := newKeyPair(t)
	alipayKey, alipayPub := newKeyPair(t)
	environ := []string{
		"DB_DRIVER=mysql", "DB_DSN=" + cfg.FormatDSN(), "NOTIFY_TIMEOUT=2s",
		"ALIPAY_APP_ID=2021000000000077", "ALIPAY_SELLER_ID=2088000000000077",
		"ALIPAY_APP_PRIVATE_KEY=" + appKey, "ALIPAY_PUBLIC_KEY=" + alipayPub,
	}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := dao.Open(ctx, dao.DriverMySQL, dsn, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.CreateOrder(ctx, "SILENT-1", 1, decimal.RequireFromString("12.30")); err != nil {
		t.Fatal(err)
	}
	base, _ := start(t, []string{"serve"}, environ)

	form := url.Values{
		"app_id": {"2021000000000077"}, "seller_id": {"2088000000000077"}, "notify_id": {"silent-1"},
		"notify_type": {"trade_status_sync"}, "trade_status": {"TRADE_SUCCESS"}, "out_trade_no": {"SILENT-1"},
		"trade_no": {"2026113022001499990001"}, "total_amount": {"12.30"}, "gmt_payment": {"2026-11-30 14:00:00"},
	}
	signed, err := alipay.SignForm(alipayKey, form)
	if err != nil {
		t.Fatal(err)
	}

	proxy.setFrozen(true)
	if got := post(t, base+"/alipay/notify", signed.Encode()); got != "failure" {
		t.Fatalf("answer while the database is silent: %q, want failure", got)
	}
	if code := get(t, base+"/readyz"); code != 503 {
		t.Fatalf("/readyz while the database is silent: %d, want 503", code)
	}
	proxy.setFrozen(false)
	if got := post(t, base+"/alipay/notify", signed.Encode()); got != "success" {
		t.Fatalf("answer to the resend: %q, want success", got)
	}
	if code := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz after recovery: %d", code)
	}
	o, err := store.Order(ctx, "SILENT-1")
	if err != nil || o.Status != model.OrderPaid {
		t.Fatalf("order after recovery: %+v %v", o, err)
	}
}
