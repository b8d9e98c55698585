// Package fakewechatpay is a stand-in for WeChat Pay's API v3, for tests
// and `paynotify dev`, at the wire: it checks each request's
// WECHATPAY2-SHA256-RSA2048 Authorization against the merchant's key,
// serves pay (native, h5, jsapi, app), query, close, refund, refund query
// and the trade bill, keeps trades in memory, signs every answer, and
// sends signed, encrypted notifications, resending them on WeChat Pay's
// schedule (compressed) until a 2xx. It signs with a WeChat Pay public
// key, a platform certificate, or either at random, as WeChat Pay does
// while a merchant switches from one to the other. Tests can make it fail,
// drop or delay calls, and lose, duplicate or hold notifications, and it
// can send a signature probe.
//
// Production never reaches it: the client is pointed here only through
// wechatpay.Config.Gateway.
package fakewechatpay

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"sync"
	"time"

	"paynotify/internal/fake"
	"paynotify/wechatpay"
)

// SignMode says which key signs answers and notifications.
type SignMode int

// Sign modes.
const (
	// SignPublicKey: the WeChat Pay public key's private half (serial
	// PUB_KEY_ID_…).
	SignPublicKey SignMode = iota
	// SignCertificate: the platform certificate's key (serial: the
	// certificate's).
	SignCertificate
	// SignEither: one of the two at random for each message, as during a
	// switch from certificates to the public key.
	SignEither
)

// Resends is WeChat Pay's schedule of notification resends after the
// first attempt fails: 15 times over about 24 hours.
var Resends = []time.Duration{
	15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute, 60 * time.Minute,
	3 * time.Hour, 3 * time.Hour, 3 * time.Hour, 6 * time.Hour, 6 * time.Hour,
}

// Config says which merchant the fake serves and which keys it uses.
type Config struct {
	// MchID and AppID are the merchant's: calls must name them, and
	// notifications carry them.
	MchID, AppID string
	// AppIDs are the merchant's other appids (a mini program, an official
	// account, …): a prepay may name any of them, and the trade's
	// notifications and queries carry the one it named.
	AppIDs []string
	// APIv3Key (32 bytes) encrypts notifications' resources.
	APIv3Key string
	// PrivateKey (PEM) and PublicKeyID are the WeChat Pay public key's
	// private half and id. PlatformKey (PEM) and PlatformCert (PEM) are a
	// platform certificate and its key. Set one pair or both.
	PrivateKey, PublicKeyID   string
	PlatformKey, PlatformCert string
	// Sign picks the key; with one pair only, that pair signs.
	Sign SignMode
	// MerchantPublicKey (PEM) and MerchantSerial are the merchant's: each
	// call's Authorization must be signed by it and name the serial, else
	// 401 SIGN_ERROR. Empty: calls are not checked.
	MerchantPublicKey, MerchantSerial string
	// NotifyURL receives the notifications of trades whose call named no
	// notify_url.
	NotifyURL string
	// Resends is the resend schedule; nil means Resends divided by 1000
	// (15 ms … 21.6 s), empty means no resends.
	Resends []time.Duration
	// HTTPClient posts notifications; nil means one with a 5 s timeout,
	// WeChat Pay's.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// signer is one key the fake signs with.
type signer struct {
	key    *rsa.PrivateKey
	serial string
}

// Server is a fake WeChat Pay. Serve Handler on loopback and point
// wechatpay.Config.Gateway at it. It is safe for concurrent use.
type Server struct {
	cfg      Config
	aead     cipher.AEAD
	signers  []signer // public key first, then certificate
	merchant *rsa.PublicKey
	client   *http.Client
	now      func() time.Time
	resends  []time.Duration

	// bg sends notifications and resends after a call is answered;
	// faults are the calls' queued misbehaviours.
	bg     *fake.Background
	faults fake.Faults[fault]

	mu    sync.Mutex
	byOut map[string]*Trade
	// elsewhere holds paid transactions told of (AddPaidTrade) for an
	// out_trade_no byOut already has: a second payment of one order, as
	// dev's replay files make. The bill and queries by id find them.
	elsewhere []*Trade
	byPrepay  map[string]*Trade
	refunds   map[string]*Refund // by out_refund_no
	settle    []wechatpay.RefundStatus
	notes     []Notification
	lose      bool
	hold      bool
	copies    int
	seq       int
	bill      billState
}

// New checks cfg and returns a fake with no trades.
func New(cfg Config) (*Server, error) {
	if cfg.MchID == "" || cfg.AppID == "" {
		return nil, errors.New("fakewechatpay: MchID and AppID are required")
	}
	if len(cfg.APIv3Key) != 32 {
		return nil, errors.New("fakewechatpay: APIv3Key must be 32 bytes")
	}
	block, _ := aes.NewCipher([]byte(cfg.APIv3Key))
	aead, _ := cipher.NewGCM(block)
	s := &Server{
		// Each merchant's ids from a range of its own, as WeChat Pay's are
		// unique across merchants: two fakes never issue one
		// transaction_id.
		seq: int(crc32.ChecksumIEEE([]byte(cfg.MchID))%1000) * 1_000_000_000,
		cfg: cfg, aead: aead, client: cfg.HTTPClient, now: cfg.Now, resends: cfg.Resends,
		byOut: make(map[string]*Trade), byPrepay: make(map[string]*Trade), refunds: make(map[string]*Refund),
		bg: fake.NewBackground(),
	}
	if cfg.PrivateKey != "" {
		key, err := wechatpay.ParsePrivateKey(cfg.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("fakewechatpay: PrivateKey: %w", err)
		}
		if cfg.PublicKeyID == "" {
			return nil, errors.New("fakewechatpay: PublicKeyID is required with PrivateKey")
		}
		s.signers = append(s.signers, signer{key: key, serial: cfg.PublicKeyID})
	}
	if cfg.PlatformKey != "" || cfg.PlatformCert != "" {
		key, err := wechatpay.ParsePrivateKey(cfg.PlatformKey)
		if err != nil {
			return nil, fmt.Errorf("fakewechatpay: PlatformKey: %w", err)
		}
		certs, err := wechatpay.ParseCertificates(cfg.PlatformCert)
		if err != nil {
			return nil, fmt.Errorf("fakewechatpay: PlatformCert: %w", err)
		}
		if !certs[0].PublicKey.(*rsa.PublicKey).Equal(&key.PublicKey) {
			return nil, errors.New("fakewechatpay: PlatformCert is not PlatformKey's")
		}
		s.signers = append(s.signers, signer{key: key, serial: wechatpay.Serial(certs[0])})
	}
	if len(s.signers) == 0 {
		return nil, errors.New("fakewechatpay: PrivateKey with PublicKeyID, or PlatformKey with PlatformCert, is required")
	}
	if cfg.MerchantPublicKey != "" {
		key, err := wechatpay.ParsePublicKey(cfg.MerchantPublicKey)
		if err != nil {
			return nil, fmt.Errorf("fakewechatpay: MerchantPublicKey: %w", err)
		}
		s.merchant = key
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: 5 * time.Second}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.resends == nil {
		for _, d := range Resends {
			s.resends = append(s.resends, d/1000)
		}
	}
	return s, nil
}

// Handler serves the API (/v3/...), the cashier (/cashier/...) and the
// bill files.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/pay/transactions/{method}", s.api("pay", s.prepay))
	mux.HandleFunc("GET /v3/pay/transactions/out-trade-no/{out_trade_no}", s.api("query", s.query))
	mux.HandleFunc("GET /v3/pay/transactions/id/{transaction_id}", s.api("query", s.queryByID))
	mux.HandleFunc("POST /v3/pay/transactions/out-trade-no/{out_trade_no}/close", s.api("close", s.close))
	mux.HandleFunc("POST /v3/refund/domestic/refunds", s.api("refund", s.refund))
	mux.HandleFunc("GET /v3/refund/domestic/refunds/{out_refund_no}", s.api("refund query", s.refundQuery))
	mux.HandleFunc("GET /v3/bill/tradebill", s.api("trade bill", s.tradeBill))
	mux.HandleFunc("GET /v3/billdownload/file", s.billDownload)
	mux.HandleFunc("GET /cashier/{prepay_id}", s.cashier)
	mux.HandleFunc("POST /cashier/pay", s.cashierPay)
	return mux
}

// Close stops notifications still being sent in the background (resends
// included) and waits for them. The fake keeps its trades.
func (s *Server) Close() { s.bg.Close() }
