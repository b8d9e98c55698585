// Package fakealipay is a stand-in for Alipay's open-platform gateway, for
// tests and `paynotify dev`. It serves the gateway methods paynotify calls
// (precreate, page and wap pay, query, close, refund, refund query, the
// trade bill's download URL), a cashier page and the bill ZIPs, keeps
// trades in memory, and signs its answers and notifications with its own
// key, which the service trusts in tests and dev only. Tests can make it
// fail or drop calls, answer too late, lose, duplicate, hold or reorder
// notifications, and make its bill differ from its trades, to drive the
// compensation paths and reconciliation.
//
// Production never reaches it: the smartwalle client is pointed here only
// through its sandbox gateway option (alipay.Config.SandboxGateway).
package fakealipay

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"paynotify/alipay"
	"paynotify/internal/fake"
)

// AlipayResends is Alipay's schedule of notification resends: 4m, 10m,
// 10m, 1h, 2h, 6h, 15h after a delivery it got no "success" to.
var AlipayResends = []time.Duration{4 * time.Minute, 10 * time.Minute, 10 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 15 * time.Hour}

// Config says which merchant the fake serves and which keys it uses.
type Config struct {
	// AppID and SellerID are the merchant's: calls must name AppID, and
	// notifications carry both.
	AppID, SellerID string
	// PrivateKey (PEM, PKCS#1 or PKCS#8) is the fake Alipay's own key: it
	// signs answers and notifications. The service verifies them with its
	// public half, as it would Alipay's.
	PrivateKey string
	// AppPublicKey (PEM), if set, is the merchant's public key: each call's
	// RSA2 signature is checked with it and a bad one is answered 40002
	// isv.invalid-signature. Empty: calls are not checked.
	AppPublicKey string
	// NotifyURL receives the notifications of trades whose creating call
	// carried no notify_url.
	NotifyURL string
	// BackURL, if set, is the cashier's way back once paid when the trade
	// has no return_url: the trade's out_trade_no is appended, escaped
	// (dev: its console's search, which opens the order).
	BackURL string
	// Apps are the merchant's other apps, beside AppID: each is verified
	// with its own public key, and a trade belongs to the app that opened
	// it (its queries, closes and refunds must come from that app).
	Apps []App
	// Resends is the schedule of a notification's resends after a
	// delivery not answered "success" (Alipay's is AlipayResends); nil
	// or empty, none: a test resends with Resend.
	Resends []time.Duration
	// HTTPClient posts notifications; nil means one with a 5s timeout.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// App is one more app the fake serves: its app_id, its seller (another
// seller's, or AppID's own) and the public key its calls are checked
// with (empty: not checked).
type App struct {
	AppID, SellerID, AppPublicKey string
}

// app is an app the fake serves, its key parsed.
type app struct {
	id, seller string
	key        *rsa.PublicKey // nil: calls are not verified
}

// Server is a fake Alipay gateway. Serve Handler on loopback and point the
// smartwalle client at GatewayURL. It is safe for concurrent use.
type Server struct {
	cfg Config
	key *rsa.PrivateKey
	// apps are the apps served by app_id, cfg.AppID's among them.
	apps   map[string]*app
	client *http.Client
	now    func() time.Time

	// bg sends notifications and resends after a call is answered;
	// Close ends it. faults are the methods' queued misbehaviours.
	bg     *fake.Background
	faults fake.Faults[fault]

	mu     sync.Mutex
	byOut  map[string]*Trade // by out_trade_no
	byNo   map[string]*Trade // by trade_no
	notes  []Notification
	lose   bool
	hold   bool
	copies int
	bill   billState
}

// New checks cfg and returns a fake with no trades.
func New(cfg Config) (*Server, error) {
	if cfg.AppID == "" || cfg.SellerID == "" {
		return nil, errors.New("fakealipay: AppID and SellerID are required")
	}
	key, err := parsePrivateKey(cfg.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("fakealipay: PrivateKey: %w", err)
	}
	// SignForm parses the key its own way; fail here, not at the first
	// notification.
	if _, err := alipay.PublicKeyOf(cfg.PrivateKey); err != nil {
		return nil, fmt.Errorf("fakealipay: PrivateKey: %w", err)
	}
	s := &Server{
		cfg:    cfg,
		key:    key,
		client: cfg.HTTPClient,
		now:    cfg.Now,
		byOut:  make(map[string]*Trade),
		byNo:   make(map[string]*Trade),
		bg:     fake.NewBackground(),
	}
	s.apps = map[string]*app{}
	for i, a := range append([]App{{AppID: cfg.AppID, SellerID: cfg.SellerID, AppPublicKey: cfg.AppPublicKey}}, cfg.Apps...) {
		if a.AppID == "" || a.SellerID == "" || s.apps[a.AppID] != nil {
			return nil, fmt.Errorf("fakealipay: Apps[%d]: an AppID of its own and a SellerID are required", i-1)
		}
		ap := &app{id: a.AppID, seller: a.SellerID}
		if a.AppPublicKey != "" {
			if ap.key, err = parsePublicKey(a.AppPublicKey); err != nil {
				return nil, fmt.Errorf("fakealipay: app %s: AppPublicKey: %w", a.AppID, err)
			}
		}
		s.apps[a.AppID] = ap
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: 5 * time.Second}
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Handler serves the gateway ("/gateway.do", GET or POST, the method named
// by the method parameter) and the cashier pages ("/cashier/...").
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /gateway.do", s.gateway)
	mux.HandleFunc("POST /gateway.do", s.gateway)
	mux.HandleFunc("GET /cashier/{trade_no}", s.cashier)
	mux.HandleFunc("POST /cashier/pay", s.cashierPay)
	mux.HandleFunc("GET /bill/{file}", s.billDownload)
	return mux
}

// GatewayURL is the gateway address for a Handler served at base (such as
// an httptest.Server's URL): what alipay.Config.SandboxGateway takes.
func (s *Server) GatewayURL(base string) string { return base + "/gateway.do" }

// Close stops notifications still being sent in the background and waits
// for them. The fake keeps its trades and answers calls afterwards.
func (s *Server) Close() { s.bg.Close() }
