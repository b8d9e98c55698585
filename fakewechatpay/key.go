package fakewechatpay

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"paynotify/wechatpay"
)

// pick returns the signer for one message, by the sign mode.
func (s *Server) pick() signer {
	if len(s.signers) == 1 {
		return s.signers[0]
	}
	switch s.cfg.Sign {
	case SignPublicKey:
		return s.signers[0]
	case SignCertificate:
		return s.signers[1]
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(2))
	return s.signers[n.Int64()]
}

// Signed is the Wechatpay-* headers of one message.
type Signed struct {
	Timestamp, Nonce, Signature, Serial string
}

// Set writes the headers onto h.
func (g Signed) Set(h http.Header) {
	h.Set(wechatpay.HeaderTimestamp, g.Timestamp)
	h.Set(wechatpay.HeaderNonce, g.Nonce)
	h.Set(wechatpay.HeaderSignature, g.Signature)
	h.Set(wechatpay.HeaderSerial, g.Serial)
	h.Set(wechatpay.HeaderSignatureType, wechatpay.SignatureType)
}

// sign signs body as WeChat Pay signs answers and notifications:
// SHA256withRSA over "timestamp\nnonce\nbody\n".
func (s *Server) sign(body []byte) Signed {
	return signWith(s.pick(), s.now(), body)
}

// signWith signs body with one signer at time t.
func signWith(k signer, t time.Time, body []byte) Signed {
	g := Signed{Timestamp: strconv.FormatInt(t.Unix(), 10), Nonce: nonce(32), Serial: k.serial}
	digest := sha256.Sum256([]byte(g.Timestamp + "\n" + g.Nonce + "\n" + string(body) + "\n"))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k.key, crypto.SHA256, digest[:])
	if err != nil {
		panic(err) // a parsed RSA key signs a SHA-256 digest
	}
	g.Signature = base64.StdEncoding.EncodeToString(sig)
	return g
}

// SignNotification signs a notification body as WeChat Pay would, at
// time t, with the key of serial (the public key's id or the platform
// certificate's serial): what `paynotify sign -provider wechatpay` uses
// to re-sign testdata.
func SignNotification(privateKeyPEM, serial string, t time.Time, body []byte) (Signed, error) {
	key, err := wechatpay.ParsePrivateKey(privateKeyPEM)
	if err != nil {
		return Signed{}, err
	}
	return signWith(signer{key: key, serial: serial}, t, body), nil
}

// nonce is n random upper-case hex characters.
func nonce(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))[:n]
}

// authorization is a parsed Authorization header of a merchant's call.
type authorization struct {
	mchID, nonce, timestamp, serial, signature string
}

// parseAuthorization reads `WECHATPAY2-SHA256-RSA2048 mchid="…",…`.
func parseAuthorization(h string) (authorization, bool) {
	rest, ok := strings.CutPrefix(h, "WECHATPAY2-SHA256-RSA2048 ")
	if !ok {
		return authorization{}, false
	}
	var a authorization
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return authorization{}, false
		}
		v = strings.Trim(v, `"`)
		switch k {
		case "mchid":
			a.mchID = v
		case "nonce_str":
			a.nonce = v
		case "timestamp":
			a.timestamp = v
		case "serial_no":
			a.serial = v
		case "signature":
			a.signature = v
		}
	}
	return a, a.mchID != "" && a.nonce != "" && a.timestamp != "" && a.serial != "" && a.signature != ""
}

// verifyCall checks a call's Authorization: "METHOD\nURI\ntimestamp\n
// nonce\nbody\n" signed by the merchant's key, naming our mchid and the
// merchant's serial, within 5 minutes. It says why not, or "".
func (s *Server) verifyCall(r *http.Request, body []byte) string {
	a, ok := parseAuthorization(r.Header.Get("Authorization"))
	if !ok {
		return "Authorization is missing or malformed"
	}
	if a.mchID != s.cfg.MchID {
		return "mchid in Authorization is not this merchant's"
	}
	if s.cfg.MerchantSerial != "" && a.serial != s.cfg.MerchantSerial {
		return "serial_no is not the merchant certificate's"
	}
	ts, err := strconv.ParseInt(a.timestamp, 10, 64)
	if err != nil {
		return "timestamp is not a number"
	}
	if d := s.now().Sub(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return "timestamp more than 5 minutes off"
	}
	sig, err := base64.StdEncoding.DecodeString(a.signature)
	if err != nil {
		return "signature is not base64"
	}
	msg := r.Method + "\n" + r.URL.RequestURI() + "\n" + a.timestamp + "\n" + a.nonce + "\n" + string(body) + "\n"
	digest := sha256.Sum256([]byte(msg))
	if rsa.VerifyPKCS1v15(s.merchant, crypto.SHA256, digest[:], sig) != nil {
		return "signature does not verify with the merchant's key"
	}
	return ""
}
