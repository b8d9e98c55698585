package wechatpay

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/services/payments"

	"paynotify/model"
)

// The headers WeChat Pay signs its notifications and answers with.
const (
	HeaderSignature     = "Wechatpay-Signature"
	HeaderSerial        = "Wechatpay-Serial"
	HeaderTimestamp     = "Wechatpay-Timestamp"
	HeaderNonce         = "Wechatpay-Nonce"
	HeaderSignatureType = "Wechatpay-Signature-Type"
)

// SignatureType is the only signature WeChat Pay's v3 API uses.
const SignatureType = "WECHATPAY2-SHA256-RSA2048"

// ProbePrefix starts the Wechatpay-Signature of a signature probe:
// WeChat Pay checks that a merchant refuses a bad signature by sending one.
const ProbePrefix = "WECHATPAY/SIGNTEST/"

// MaxClockSkew is how far a Wechatpay-Timestamp may be from our clock.
const MaxClockSkew = 5 * time.Minute

// MaxNotifyBody bounds a notification's body; real ones are about 1 KB.
const MaxNotifyBody = 64 << 10

// Event types of notifications.
const (
	EventTransactionSuccess = "TRANSACTION.SUCCESS"
	EventRefundSuccess      = "REFUND.SUCCESS"
	EventRefundAbnormal     = "REFUND.ABNORMAL"
	EventRefundClosed       = "REFUND.CLOSED"
)

// Why a notification is refused. Each wraps the model error the service
// maps to an answer; errors.Is tells them apart.
var (
	// ErrSignatureProbe: Wechatpay-Signature is a WeChat Pay signature
	// probe, which must be refused like any bad signature.
	ErrSignatureProbe = fmt.Errorf("%w (WeChat Pay's, %s…)", model.ErrSignatureProbe, ProbePrefix)
	// ErrStaleTimestamp: Wechatpay-Timestamp is more than MaxClockSkew
	// from our clock: a replay, or a clock that is wrong.
	ErrStaleTimestamp = fmt.Errorf("%w: Wechatpay-Timestamp more than 5 minutes off", model.ErrBadSignature)
	// ErrUnknownSerial: Wechatpay-Serial names neither our public key nor
	// a platform certificate valid now.
	ErrUnknownSerial = fmt.Errorf("%w: Wechatpay-Serial names no key of ours", model.ErrBadSignature)
	// ErrSignature: the signature does not verify, or a signed header is
	// missing or malformed.
	ErrSignature = fmt.Errorf("%w: Wechatpay-Signature does not verify", model.ErrBadSignature)
	// ErrDecrypt: signed by WeChat Pay, but the resource does not decrypt
	// with our APIv3 key (a wrong WECHATPAY_APIV3_KEY, most likely).
	ErrDecrypt = fmt.Errorf("%w: resource does not decrypt with the APIv3 key", model.ErrInvalidNotification)
	// ErrNotPaid: a transaction notification whose trade_state is not
	// SUCCESS.
	ErrNotPaid = fmt.Errorf("%w: trade_state is not SUCCESS", model.ErrInvalidNotification)
)

// Notification is a verified, decrypted notification: a payment or a
// refund's outcome, never both.
type Notification struct {
	// ID is the notification's id, the same on every resend.
	ID string
	// EventType is TRANSACTION.SUCCESS or one of the REFUND.* types.
	EventType string
	// Payment is set for TRANSACTION.SUCCESS.
	Payment *Transaction
	// Refund is set for REFUND.*: a hint to query the refund now, never a
	// payment.
	Refund *RefundHint
}

// Transaction is a paid WeChat Pay transaction, checked: ours, SUCCESS,
// every field present.
type Transaction struct {
	// TransactionID is WeChat Pay's number: the ledger's trade_no.
	TransactionID string
	OutTradeNo    string
	// Total is the order's amount in fen; Currency is CNY for 直连商户.
	Total    int64
	Currency string
	// SuccessTime is when the buyer paid.
	SuccessTime time.Time
	// TradeType is NATIVE, JSAPI, MWEB (h5) or APP.
	TradeType string
	// NotifyID is the notification's id ("" when the transaction came
	// from a query).
	NotifyID string
	// MchID and AppID are the merchant and the app the buyer paid in:
	// the ledger's account and app.
	MchID, AppID string
}

// RefundHint is what a REFUND.* notification says of a refund.
type RefundHint struct {
	OutRefundNo, RefundID   string
	TransactionID, OutTrade string
	// Status is SUCCESS, ABNORMAL or CLOSED.
	Status RefundStatus
	// Refund is the amount refunded, in fen.
	Refund int64
}

// envelope is what is read of a notification's body: a field not named
// here (resource_type, summary, create_time) is skipped, not copied.
type envelope struct {
	ID        string `json:"id"`
	EventType string `json:"event_type"`
	Resource  struct {
		Algorithm string `json:"algorithm"`
		// Ciphertext is base64 in the body: encoding/json decodes it
		// (base64.StdEncoding) straight into the bytes to open, where a
		// string field was copied out of the body and decoded again.
		Ciphertext     []byte `json:"ciphertext"`
		AssociatedData string `json:"associated_data"`
		Nonce          string `json:"nonce"`
	} `json:"resource"`
}

// paidResource is what is read of a transaction: of a TRANSACTION.SUCCESS
// notification's decrypted resource, decoded straight into it, or of a
// query's payments.Transaction (paidOf). The SDK's model has a pointer
// per field and a dozen fields more, which decoding a notice paid for.
type paidResource struct {
	MchID         string     `json:"mchid"`
	AppID         string     `json:"appid"`
	TradeState    string     `json:"trade_state"`
	TransactionID string     `json:"transaction_id"`
	OutTradeNo    string     `json:"out_trade_no"`
	TradeType     string     `json:"trade_type"`
	SuccessTime   string     `json:"success_time"`
	Amount        paidAmount `json:"amount"` // absent or null: no Total
}

// paidAmount is a transaction's amount: total in fen.
type paidAmount struct {
	Total    *int64 `json:"total"`
	Currency string `json:"currency"`
}

// paidOf is what paidResource reads of a query's transaction.
func paidOf(t payments.Transaction) paidResource {
	p := paidResource{
		MchID: deref(t.Mchid), AppID: deref(t.Appid), TradeState: deref(t.TradeState),
		TransactionID: deref(t.TransactionId), OutTradeNo: deref(t.OutTradeNo),
		TradeType: deref(t.TradeType), SuccessTime: deref(t.SuccessTime),
	}
	if t.Amount != nil {
		p.Amount = paidAmount{Total: t.Amount.Total, Currency: deref(t.Amount.Currency)}
	}
	return p
}

// refundResource is a REFUND.* notification's decrypted resource.
type refundResource struct {
	MchID         string `json:"mchid"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	OutRefundNo   string `json:"out_refund_no"`
	RefundID      string `json:"refund_id"`
	RefundStatus  string `json:"refund_status"`
	Amount        struct {
		Refund *int64 `json:"refund"`
	} `json:"amount"`
}

// ReadNotification reads a notification's body from r (at most
// MaxNotifyBody) and verifies it as VerifyNotification does.
func (c *Client) ReadNotification(r *http.Request) (Notification, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxNotifyBody+1))
	if err != nil {
		return Notification{}, fmt.Errorf("%w: reading the body: %v", model.ErrInvalidNotification, err)
	}
	if len(body) > MaxNotifyBody {
		return Notification{}, fmt.Errorf("%w: body over %d bytes", model.ErrInvalidNotification, MaxNotifyBody)
	}
	return c.VerifyNotification(r.Context(), r.Header, body)
}

// VerifyNotification checks a notification's signature headers against
// body, decrypts its resource and checks what it says. The SDK's own
// notify.Handler is not used: it answers every refusal with the same
// untyped error (a probe looks like a forgery, a stale timestamp like
// both), judges timestamps by the wall clock only, and reads a missing
// Wechatpay-Timestamp as 0.
func (c *Client) VerifyNotification(ctx context.Context, h http.Header, body []byte) (Notification, error) {
	if err := c.verifySigned(h, body); err != nil {
		return Notification{}, err
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		if errors.As(err, new(base64.CorruptInputError)) {
			return Notification{}, fmt.Errorf("%w: ciphertext is not base64", model.ErrInvalidNotification)
		}
		return Notification{}, fmt.Errorf("%w: body is not JSON: %v", model.ErrInvalidNotification, err)
	}
	if env.ID == "" {
		return Notification{}, fmt.Errorf("%w: no id", model.ErrInvalidNotification)
	}
	if env.Resource.Algorithm != "AEAD_AES_256_GCM" {
		return Notification{}, fmt.Errorf("%w: resource algorithm %q, want AEAD_AES_256_GCM", model.ErrInvalidNotification, clip(env.Resource.Algorithm))
	}
	plain, err := c.open(env.Resource.Nonce, env.Resource.Ciphertext, env.Resource.AssociatedData)
	if err != nil {
		return Notification{}, err
	}
	n := Notification{ID: env.ID, EventType: env.EventType}
	switch env.EventType {
	case EventTransactionSuccess:
		var t paidResource
		if err := json.Unmarshal(plain, &t); err != nil {
			return Notification{}, fmt.Errorf("%w: resource is not a transaction: %v", model.ErrInvalidNotification, err)
		}
		tx, err := c.transaction(t)
		if err != nil {
			return Notification{}, err
		}
		tx.NotifyID = env.ID
		n.Payment = &tx
	case EventRefundSuccess, EventRefundAbnormal, EventRefundClosed:
		hint, err := c.refundHint(plain)
		if err != nil {
			return Notification{}, err
		}
		n.Refund = &hint
	default:
		return Notification{}, fmt.Errorf("%w: event_type %q", model.ErrInvalidNotification, clip(env.EventType))
	}
	return n, nil
}

// verifySigned checks the Wechatpay-* headers: not a probe, a fresh
// timestamp, a known serial, and a signature over
// "timestamp\nnonce\nbody\n" by that serial's key. The signature check
// is the SDK verifiers' (SHA256withRSA, the serial picking the public key
// or a certificate), done with keys prepared at start (sha256rsa): the
// SDK's prepare the RSA modulus again on every call, a fifth of the check.
// TestSignatureAgreesWithSDK holds the two together.
func (c *Client) verifySigned(h http.Header, body []byte) error {
	sig := strings.TrimSpace(h.Get(HeaderSignature))
	if strings.HasPrefix(sig, ProbePrefix) {
		return ErrSignatureProbe
	}
	serial := strings.TrimSpace(h.Get(HeaderSerial))
	ts := strings.TrimSpace(h.Get(HeaderTimestamp))
	nonce := strings.TrimSpace(h.Get(HeaderNonce))
	for _, f := range []struct{ name, v string }{{HeaderSignature, sig}, {HeaderSerial, serial}, {HeaderTimestamp, ts}, {HeaderNonce, nonce}} {
		if f.v == "" {
			return fmt.Errorf("%w: no %s", ErrSignature, f.name)
		}
	}
	if t := h.Get(HeaderSignatureType); t != "" && t != SignatureType {
		return fmt.Errorf("%w: %s %q", ErrSignature, HeaderSignatureType, clip(t))
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not a number", ErrSignature, HeaderTimestamp, clip(ts))
	}
	now := c.now()
	if off := now.Sub(time.Unix(sec, 0)); off > MaxClockSkew || off < -MaxClockSkew {
		return fmt.Errorf("%w: %s is %s from now", ErrStaleTimestamp, HeaderTimestamp, off.Round(time.Second))
	}
	key := c.keys.key(serial, now)
	if key == nil {
		return fmt.Errorf("%w: %q", ErrUnknownSerial, clip(serial))
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: not base64", ErrSignature)
	}
	if digest := signedDigest(ts, nonce, body); key.Verify(&digest, raw) != nil {
		return ErrSignature
	}
	return nil
}

// signedDigest is the SHA-256 of what WeChat Pay signs:
// "timestamp\nnonce\nbody\n".
func signedDigest(ts, nonce string, body []byte) [sha256.Size]byte {
	var buf [2048]byte // a notification is about 1 KB
	msg := append(buf[:0], ts...)
	msg = append(msg, '\n')
	msg = append(msg, nonce...)
	msg = append(msg, '\n')
	msg = append(msg, body...)
	msg = append(msg, '\n')
	return sha256.Sum256(msg)
}

// open decrypts a resource's ciphertext (AEAD_AES_256_GCM, the APIv3
// key, its nonce and associated_data). The last key tried opens ct in
// place: ct is the envelope's own copy, read by nothing after.
func (c *Client) open(nonce string, ct []byte, ad string) ([]byte, error) {
	if len(nonce) != c.aeads[0].NonceSize() {
		return nil, fmt.Errorf("%w: nonce of %d bytes, want %d", model.ErrInvalidNotification, len(nonce), c.aeads[0].NonceSize())
	}
	// While the APIv3 key is reset WeChat Pay may seal with either key:
	// the GCM tag refuses the wrong one, so trying each is safe. A key
	// that fails clears what it was given to write into, so only the
	// last may write over ct.
	for i, aead := range c.aeads {
		var dst []byte
		if i == len(c.aeads)-1 {
			dst = ct[:0]
		}
		if plain, err := aead.Open(dst, []byte(nonce), ct, []byte(ad)); err == nil {
			return plain, nil
		}
	}
	return nil, ErrDecrypt
}

// transaction checks a paid transaction (from a notification or a query)
// and makes it neutral.
func (c *Client) transaction(t paidResource) (Transaction, error) {
	if err := c.ours(t.MchID, t.AppID); err != nil {
		return Transaction{}, err
	}
	if t.TradeState != string(TradeSuccess) {
		return Transaction{}, fmt.Errorf("%w: %q", ErrNotPaid, clip(t.TradeState))
	}
	tx := Transaction{
		MchID:         t.MchID,
		AppID:         t.AppID,
		TransactionID: t.TransactionID,
		OutTradeNo:    t.OutTradeNo,
		TradeType:     t.TradeType,
		Currency:      "CNY",
	}
	if tx.TransactionID == "" || tx.OutTradeNo == "" {
		return Transaction{}, fmt.Errorf("%w: no transaction_id or out_trade_no", model.ErrInvalidNotification)
	}
	if t.Amount.Total == nil {
		return Transaction{}, fmt.Errorf("%w: no amount.total", model.ErrInvalidNotification)
	}
	if err := model.CheckAmount(Yuan(*t.Amount.Total)); err != nil {
		// The ledger's one rule: nothing past it is recorded, whoever
		// signed it (10^12 fen, 2^63-1).
		return Transaction{}, fmt.Errorf("%w: amount.total %d fen: %w", model.ErrInvalidNotification, *t.Amount.Total, err)
	}
	tx.Total = *t.Amount.Total
	if cur := t.Amount.Currency; cur != "" && cur != "CNY" {
		// 直连商户 take CNY only, and the ledger has no currency: a
		// payment in another would be recorded as yuan. Refused (WeChat Pay
		// resends) so that an operator sees it.
		return Transaction{}, fmt.Errorf("%w: currency %q, this merchant takes CNY only", model.ErrInvalidNotification, clip(cur))
	}
	at, err := time.Parse(time.RFC3339, t.SuccessTime)
	if err != nil {
		return Transaction{}, fmt.Errorf("%w: success_time %q", model.ErrInvalidNotification, clip(t.SuccessTime))
	}
	tx.SuccessTime = at.UTC()
	return tx, nil
}

// ours refuses a mchid or appid that is not ours. A refund resource has
// no appid: pass "" to check only the mchid.
func (c *Client) ours(mchID, appID string) error {
	if mchID != c.mchID {
		return fmt.Errorf("%w: mchid %q is not ours", model.ErrUnknownApp, clip(mchID))
	}
	if !c.appIDs[appID] {
		return fmt.Errorf("%w: appid %q of mchid %q", model.ErrUnknownApp, clip(appID), clip(mchID))
	}
	return nil
}

// refundHint reads a REFUND.* resource.
func (c *Client) refundHint(plain []byte) (RefundHint, error) {
	var r refundResource
	if err := json.Unmarshal(plain, &r); err != nil {
		return RefundHint{}, fmt.Errorf("%w: resource is not a refund: %v", model.ErrInvalidNotification, err)
	}
	if r.MchID != c.mchID {
		return RefundHint{}, fmt.Errorf("%w: mchid %q is not ours", model.ErrUnknownApp, clip(r.MchID))
	}
	if r.OutRefundNo == "" {
		return RefundHint{}, fmt.Errorf("%w: no out_refund_no", model.ErrInvalidNotification)
	}
	h := RefundHint{
		OutRefundNo: r.OutRefundNo, RefundID: r.RefundID,
		TransactionID: r.TransactionID, OutTrade: r.OutTradeNo,
		Status: RefundStatus(r.RefundStatus),
	}
	if r.Amount.Refund != nil {
		if err := model.CheckAmount(Yuan(*r.Amount.Refund)); err != nil {
			return RefundHint{}, fmt.Errorf("%w: amount.refund %d fen: %w", model.ErrInvalidNotification, *r.Amount.Refund, err)
		}
		h.Refund = *r.Amount.Refund
	}
	return h, nil
}

// deref is *p, or "" for nil: the SDK's models are all pointers.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// clip shortens what a sender wrote before an error quotes it.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
