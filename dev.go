package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/crypto/bcrypt"

	"paynotify/alipay"
	"paynotify/config"
	"paynotify/dao"
	"paynotify/fakealipay"
	"paynotify/fakewechatpay"
	"paynotify/handler"
	"paynotify/internal/demo"
	"paynotify/model"
	"paynotify/wechatpay"
)

// devKeyFiles are the development keys: public on purpose, refused by serve.
//
//go:embed testdata/dev/*.pem
var devKeyFiles embed.FS

// The development merchant that the forms in testdata/notify are signed
// for: one seller, two apps (web, the default, and mobile), each with its
// own key pair.
const (
	devAppID       = "2021000000000001"
	devMobileAppID = "2021000000000002"
	devSellerID    = "2088000000000001"
)

// devAlipayApps are dev's Alipay apps: name, app_id and the key files of
// its own key pair (testdata/dev), the default first.
var devAlipayApps = []struct{ name, id, privateKey, publicKey string }{
	{"web", devAppID, "app_private_key.pem", "app_public_key.pem"},
	{"mobile", devMobileAppID, "app_mobile_private_key.pem", "app_mobile_public_key.pem"},
}

// The development WeChat Pay merchant that testdata/notify/wechatpay is
// sealed for, and the serials of the development keys (testdata/dev).
const (
	devWeChatMchID          = "1900000001"
	devWeChatAppID          = "wxd000000000000001"
	devWeChatSecondAppID    = "wxd000000000000002" // dev's second app: the merchant's keys are every appid's
	devWeChatAPIv3Key       = "paynotify-dev-apiv3-key-32bytes!"
	devWeChatMerchantSerial = "3775B6A45ACD588826D15E583A95F5DD4F2B1E2F"
	devWeChatPublicKeyID    = "PUB_KEY_ID_0119000000000001"
	devWeChatCertSerial     = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
)

// devJWTSecret signs the demo member tokens `dev` prints. Public, like the
// dev keys; serve never defaults to it.
const devJWTSecret = "paynotify-dev-jwt-secret-not-for-production"

// devAdminToken guards /admin in dev.
const devAdminToken = "paynotify-dev-admin"

// The console operator dev signs in (unless CONSOLE_OPERATORS names others).
const (
	devOperator         = "demo"
	devOperatorPassword = "paynotify-demo"
)

// devKeys returns every development key, for serve to refuse.
func devKeys() []string {
	var keys []string
	entries, _ := fs.Glob(devKeyFiles, "testdata/dev/*.pem")
	for _, name := range entries {
		b, _ := devKeyFiles.ReadFile(name)
		keys = append(keys, string(b))
	}
	return keys
}

func devKey(name string) string {
	b, err := devKeyFiles.ReadFile("testdata/dev/" + name)
	if err != nil {
		panic(err) // embedded at build time: cannot be missing
	}
	return string(b)
}

const devUsage = `usage: paynotify dev [-addr ADDR] [-db FILE] [-keep] [-manual-refunds]

Runs the service on an embedded SQLite database with demo orders, SKUs,
members and coupons, the development keys from testdata/dev (public: never
for real money), a fake Alipay at /fake-alipay and a fake WeChat Pay (on a
loopback port of its own: notifications at /wechatpay/notify, replayed
with sign -provider wechatpay), and the admin token
paynotify-dev-admin (ADMIN_TOKEN overrides it). Every event is delivered
as a signed webhook to a demo endpoint, a paynotify listen dev runs on a
loopback port, whose lines ("[listen] verified <webhook-id> <type>") it
prints. It prints curl lines to paste. Other settings come from the
environment, as for serve (dev's own WEBHOOK_SECRET_KEY unless one is set).

It listens on 127.0.0.1:8080, this machine only, unless -addr (or
HTTP_ADDR) says otherwise: -addr :8080 listens on every interface. The
address is bound before the database is touched, and the database is
locked (FILE.lock) while dev runs: a second dev, on the same port or
another, fails without wiping the first one's database.

The refund worker takes every payment owed back (REFUND_PENDING) within
seconds; with -manual-refunds it leaves them in the console's queue of
payments owed back, for an operator to queue each refund by hand (the
worker still sends refunds once queued).
`

// devDefaultAddr is where dev listens unless told otherwise: loopback, since
// its keys and admin token are public.
const devDefaultAddr = "127.0.0.1:8080"

// dev runs the service on a fresh embedded SQLite database with demo
// orders and the development keys, and prints how to replay a notification.
func dev(ctx context.Context, env environment) error {
	// Configuration
	flags := newFlags("dev", devUsage)
	addr := flags.String("addr", devDefaultAddr, "listen address; HTTP_ADDR sets it too (the flag wins)")
	dbPath := flags.String("db", devDefaultDB, "SQLite file, recreated at every start (FILE.url holds the address while dev runs, for sign and reconcile -dev)")
	keep := flags.Bool("keep", false, "keep the database from the last run instead of starting fresh")
	manualRefunds := flags.Bool("manual-refunds", false, "leave payments owed back (REFUND_PENDING) to an operator: the refund worker does not take them")
	if err := parseFlags(flags, env, 0); err != nil {
		return err
	}
	cfg, err := devConfig(flags, *addr, *dbPath, env.environ)
	if err != nil {
		return err
	}
	devWebhookConfig(&cfg, env.environ)
	log := newLogger(env.stderr, cfg.LogLevel, false)

	// Listener: bound first, so a busy port fails before the database of
	// the dev that holds it is wiped.
	ln, base, err := devListen(log, cfg.HTTPAddr)
	if err != nil {
		return err
	}
	defer ln.Close() // on an early return; serving closes it otherwise
	cfg.PublicURL = base

	// Database Support
	store, release, err := openDevDB(ctx, *dbPath, *keep)
	if err != nil {
		return err
	}
	defer release()
	removeURL, err := writeDevURL(*dbPath, base)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	defer removeURL()

	// Payment Providers: dev's fakes, and its apps configured to pay
	// through them, built as serve builds its providers.
	fake, err := newDevAlipay(base)
	if err != nil {
		return err
	}
	defer fake.Close()
	wxFake, wxGateway, stopWeChat, err := devWeChatPay(base, log)
	if err != nil {
		return err
	}
	defer stopWeChat()
	providers, err := newRegistry(cfg, devProviderConfig(fake.GatewayURL(base+devFakePrefix), wxGateway))
	if err != nil {
		return err
	}
	recv, err := startDevReceiver(ctx, log, cfg, store, env.stdout)
	if err != nil {
		return err
	}
	defer recv.stop()
	orders, err := store.CountOrders(ctx)
	if err != nil {
		return err
	}
	log.Info("dev mode: development keys, demo data seeded, a fake Alipay at "+base+devFakePrefix,
		"db", *dbPath, "kept", *keep, "app_ids", devAppID+","+devMobileAppID, "seller_id", devSellerID, "orders", orders, "manual_refunds", *manualRefunds)

	// What to paste
	if err := printDevBanner(env.stdout, cfg, base, recv); err != nil {
		return err
	}

	// Start API Service
	return listenAndServe(ctx, log, env, app{cfg: cfg, store: store, providers: providers, consume: true, ln: ln, dev: true,
		manualRefunds: *manualRefunds,
		verifier:      fakealipay.Verifier{Client: providers.alipay, Fake: fake},
		mounts:        map[string]http.Handler{devFakePrefix: fake.Handler()},
		weChatNotice:  fakewechatpay.Verifier{Provider: providers.wechatpay[0], Fake: wxFake}})
}

// devListen binds addr and says the base URL it is reached at: the fake
// Alipay and notify_url need the real address (addr may say port 0).
func devListen(log *slog.Logger, addr string) (net.Listener, string, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, "", fmt.Errorf("dev: listen address %q: %w: want host:port, such as 127.0.0.1:8080, or :8080 for every interface", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, "", fmt.Errorf("dev: %w (another paynotify dev running? -addr picks another address)", err)
	}
	if err != nil {
		return nil, "", fmt.Errorf("dev: %w", err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	base := "http://" + ln.Addr().String()
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		base = "http://localhost:" + port
		log.Warn("dev listens on every interface: anyone who reaches this machine can use its public keys and admin token",
			"addr", addr)
	}
	return ln, base, nil
}

// devConfig is the environment's configuration with dev's defaults: the
// listen address, the SQLite file, the public dev secrets and operator,
// reconciliation on demand, and quick Alipay jobs.
func devConfig(flags *flag.FlagSet, addr, dbPath string, environ []string) (config.Config, error) {
	cfg, err := config.Load(environ)
	if err != nil {
		return cfg, err
	}
	cfg.HTTPAddr = devListenAddr(flags, addr, environ)
	cfg.DBDriver, cfg.DBDSN = dao.DriverSQLite, dbPath
	if cfg.APIJWTSecret == "" {
		cfg.APIJWTSecret = devJWTSecret
	}
	if cfg.AdminToken == "" {
		cfg.AdminToken = devAdminToken
	}
	if len(cfg.Operators) == 0 {
		hash, err := bcrypt.GenerateFromPassword([]byte(devOperatorPassword), bcrypt.DefaultCost)
		if err != nil {
			return cfg, err
		}
		cfg.Operators = map[string]string{devOperator: string(hash)}
	}
	if !setIn(environ, "RECON_AT") {
		// Reconciliation on demand (POST /admin/reconciliations/{provider}/{date}/run):
		// the fakes' bills of "yesterday" are whatever the demo made.
		cfg.ReconAt = "off"
	}
	if !setIn(environ, "ALIPAY_JOBS_INTERVAL") {
		cfg.AlipayJobsInterval = 5 * time.Second // a demo refund shows up while you watch
	}
	return cfg, nil
}

// openDevDB locks dbPath (a second dev on another address must not wipe
// this one's database), recreates it unless keep, migrates it and seeds
// the demo data. release closes the store and unlocks the file.
func openDevDB(ctx context.Context, dbPath string, keep bool) (store *dao.Store, release func(), err error) {
	if err := dao.CheckSQLitePath(dbPath); err != nil {
		return nil, nil, fmt.Errorf("dev: %w", err)
	}
	unlock, err := lockDevDB(dbPath)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	if !keep {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(dbPath + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, err
			}
		}
	}
	store, err = dao.Open(ctx, dao.DriverSQLite, dbPath, dao.Options{})
	if err != nil {
		return nil, nil, err
	}
	if err = store.Migrate(ctx); err == nil {
		err = demo.Seed(ctx, store)
	}
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return store, func() { store.Close(); unlock() }, nil
}

// newDevAlipay starts the fake Alipay dev pays through, with a payment it
// took for no order; it knows dev's Alipay apps (devAlipayApps), each
// signing with its own key pair.
func newDevAlipay(base string) (*fakealipay.Server, error) {
	var more []fakealipay.App
	for _, a := range devAlipayApps[1:] {
		more = append(more, fakealipay.App{AppID: a.id, SellerID: devSellerID, AppPublicKey: devKey(a.publicKey)})
	}
	fake, err := fakealipay.New(fakealipay.Config{
		AppID: devAppID, SellerID: devSellerID,
		PrivateKey:   devKey("alipay_private_key.pem"),
		AppPublicKey: devKey("app_public_key.pem"),
		Apps:         more,
		NotifyURL:    base + "/alipay/notify",
		// No shop in dev: once paid, the cashier leads back to the order
		// in the console.
		BackURL: base + "/console/search?q=",
	})
	if err != nil {
		return nil, err
	}
	// A payment Alipay took on the replay files' day whose notification
	// never came, for an order this database does not have: reconciling
	// that day finds it in the bill and records it UNMATCHED.
	fake.AddPaidTrade(devUnmatchedSN, "20261130220014888800001099", decimal.RequireFromString("66.00"),
		time.Date(2026, 11, 30, 15, 0, 0, 0, model.Beijing))
	return fake, nil
}

// devProviderConfig is dev's providers as configuration, which newRegistry
// builds as it builds serve's: its Alipay apps (devAlipayApps, one seller)
// through the fake Alipay at alipayGateway and its WeChat Pay merchant,
// with two appids, through the fake at weChatGateway, all with the
// development keys.
func devProviderConfig(alipayGateway, weChatGateway string) providerConfig {
	var pc providerConfig
	for _, a := range devAlipayApps {
		pc.alipay = append(pc.alipay, alipay.AppConfig{Name: a.name, Config: alipay.Config{
			AppID:           a.id,
			SellerID:        devSellerID,
			AppPrivateKey:   devKey(a.privateKey),
			AlipayPublicKey: devKey("alipay_public_key.pem"),
			SandboxGateway:  alipayGateway,
		}})
	}
	pc.wechatpay = []wechatpay.Config{{
		MchID: devWeChatMchID, AppID: devWeChatAppID, AppIDs: []string{devWeChatSecondAppID}, APIv3Key: devWeChatAPIv3Key,
		MerchantPrivateKey: devKey("wechatpay_merchant_private_key.pem"), MerchantSerial: devWeChatMerchantSerial,
		PublicKey: devKey("wechatpay_public_key.pem"), PublicKeyID: devWeChatPublicKeyID,
		PlatformCerts: []string{devKey("wechatpay_platform_cert.pem")},
		Gateway:       weChatGateway,
	}}
	return pc
}

// printDevBanner prints devBanner for cfg at base, with a member token
// for demo member 1 and the demo webhook endpoint recv.
func printDevBanner(w io.Writer, cfg config.Config, base string, recv *devReceiver) error {
	token, err := handler.MemberToken([]byte(cfg.APIJWTSecret), 1, 30*24*time.Hour)
	if err != nil {
		return err
	}
	token2, err := handler.MemberToken([]byte(cfg.APIJWTSecret), 2, 30*24*time.Hour)
	if err != nil {
		return err
	}
	login := "operator " + devOperator + ", password " + devOperatorPassword
	if _, ok := cfg.Operators[devOperator]; !ok {
		login = "an operator from CONSOLE_OPERATORS"
	}
	fmt.Fprintf(w, devBanner, base, cfg.AdminToken, token, login, token2, recv.endpoint, recv.url, devListenPrefix)
	return nil
}

// devBanner is what dev prints for a newcomer to paste: base URL, admin
// token, member token (plain text, not log-quoted).
const devBanner = `
paynotify dev is up at %[1]s

  Operator console: %[1]s/console/
    sign in as %[4]s

  Replay a signed Alipay notification (QA files in testdata/notify/):
    curl --data @testdata/notify/01_pay_demo_1001.form %[1]s/alipay/notify
  Every event goes, signed, to webhook endpoint %[6]d (%[7]s, a paynotify listen in dev): its "%[8]sverified <webhook-id> <type>" lines and bodies print here.

  Replay a WeChat Pay notification (testdata/notify/wechatpay/; sign makes its timestamp fresh):
    go run . sign -provider wechatpay -url %[1]s/wechatpay/notify testdata/notify/wechatpay/01_pay_demo_1001.json | sh

  Place an order as demo member 1 (alice: 5000 points, coupon 1 worth 20.00; SKUs 1-3):
    TOKEN=%[3]s
    curl -H "Authorization: Bearer $TOKEN" -H "Idempotency-Key: demo-1" \
      -d '{"items":[{"sku_id":1,"quantity":2}],"coupon_id":1,"use_integration":1000}' %[1]s/api/v1/orders
  Demo member 2 (bob: no points, coupon 2 worth 5.00; DEMO-1003 and DEMO-1004 are his):
    TOKEN2=%[5]s

  Pay it through the fake Alipay (open pay_url, press Pay):
    curl -H "Authorization: Bearer $TOKEN" -H "Idempotency-Key: pay-1" -d '{"method":"page"}' %[1]s/api/v1/orders/<order_sn>/pay
  or through the fake WeChat Pay (open code_url, press Pay):
    curl -H "Authorization: Bearer $TOKEN" -H "Idempotency-Key: pay-2" -d '{"provider":"wechatpay","method":"native"}' %[1]s/api/v1/orders/<order_sn>/pay

  Operator views:
    curl -H "Authorization: Bearer %[2]s" '%[1]s/admin/outbox?state=pending'
    curl -H "Authorization: Bearer %[2]s" %[1]s/admin/journal/totals

  Reconcile the replay files' day (2026-11-30) against the fake Alipay's bill and the fake WeChat Pay's
  (dev's keys against dev's fakes; or Run this day on the console's Reconciliation page):
    go run . reconcile -dev -url %[1]s -date 2026-11-30
    curl -H "Authorization: Bearer %[2]s" %[1]s/admin/reconciliations/2026-11-30
    curl -H "Authorization: Bearer %[2]s" %[1]s/admin/reconciliations/wechatpay/2026-11-30

`

// devUnmatchedSN is the out_trade_no of the payment dev's fake Alipay
// took for no order.
const devUnmatchedSN = "DEMO-1099"

// devFakePrefix is where dev serves its fake Alipay.
const devFakePrefix = "/fake-alipay"

// setIn reports whether environ sets name.
func setIn(environ []string, name string) bool {
	for _, kv := range environ {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// envValue is name's value in environ (the last one wins, as in Load).
func envValue(environ []string, name string) string {
	v := ""
	for _, kv := range environ {
		if rest, ok := strings.CutPrefix(kv, name+"="); ok {
			v = rest
		}
	}
	return v
}

// devListenAddr is where dev listens: -addr if given, else HTTP_ADDR if
// set, else loopback only.
func devListenAddr(flags *flag.FlagSet, addr string, environ []string) string {
	given := false
	flags.Visit(func(f *flag.Flag) { given = given || f.Name == "addr" })
	if !given && setIn(environ, "HTTP_ADDR") {
		return envValue(environ, "HTTP_ADDR")
	}
	return addr
}
