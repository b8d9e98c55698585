package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"paynotify/fakewechatpay"
	"paynotify/model"
)

// The WeChat Pay merchant the service runs as in the benchmark (-wechatpay).
const (
	benchMchID       = "1900041042"
	benchWxAppID     = "wxb000000000000042"
	benchPublicKeyID = "PUB_KEY_ID_0119004100000042"
	benchMerchantSN  = "4F00000000000000000000000000000000000042"
)

// Workloads of -wechatpay: the same orders' kind of notices, through
// POST /wechatpay/notify on the same processes.
const (
	kindWeChatFirst     = "service first notice (WeChat Pay)"
	kindWeChatDuplicate = "service duplicate (WeChat Pay)"
)

// weChatKeys are the benchmark's WeChat Pay keys, fresh like Alipay's:
// files under the run's temporary directory, as serve reads them.
type weChatKeys struct {
	merchantFile, publicFile string
	private                  string // "WeChat Pay's" key: signs the notifications
	apiV3Key                 string
}

// newWeChatKeys generates the merchant's key and WeChat Pay's, and an
// APIv3 key, writing what serve reads into dir.
func newWeChatKeys(dir string) (weChatKeys, error) {
	var k weChatKeys
	gen := func() (*rsa.PrivateKey, string, error) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, "", err
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		return key, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), err
	}
	_, merchant, err := gen()
	if err != nil {
		return k, err
	}
	wx, wxPEM, err := gen()
	if err != nil {
		return k, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&wx.PublicKey)
	if err != nil {
		return k, err
	}
	k.private = wxPEM
	k.merchantFile, k.publicFile = filepath.Join(dir, "apiclient_key.pem"), filepath.Join(dir, "pub_key.pem")
	if err := os.WriteFile(k.merchantFile, []byte(merchant), 0o600); err != nil {
		return k, err
	}
	if err := os.WriteFile(k.publicFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return k, err
	}
	raw := make([]byte, 16)
	rand.Read(raw)
	k.apiV3Key = hex.EncodeToString(raw) // 32 bytes
	return k, nil
}

// env is the WECHATPAY_* part of the service's environment.
func (k weChatKeys) env() []string {
	return []string{
		"WECHATPAY_MCHID=" + benchMchID, "WECHATPAY_APPID=" + benchWxAppID,
		"WECHATPAY_APIV3_KEY=" + k.apiV3Key,
		"WECHATPAY_MERCHANT_KEY_FILE=" + k.merchantFile, "WECHATPAY_MERCHANT_SERIAL=" + benchMerchantSN,
		"WECHATPAY_PUBLIC_KEY_FILE=" + k.publicFile, "WECHATPAY_PUBLIC_KEY_ID=" + benchPublicKeyID,
	}
}

// weChatRequest is one notification on the wire: its Wechatpay-* header
// lines and its body.
type weChatRequest struct {
	header, body []byte
}

// weChatNotices seals (AES-256-GCM) and signs a TRANSACTION.SUCCESS
// notification for every order, on every core, now: its timestamp must be
// within 5 minutes when the service reads it, duplicates included. Like
// Alipay's signing, this is WeChat Pay's cost, paid before measuring.
func weChatNotices(ctx context.Context, k weChatKeys, orders []order) ([]weChatRequest, error) {
	paid := time.Now().Add(-time.Minute).In(model.Beijing).Format(time.RFC3339)
	return onEveryCore(ctx, "wechatpay notices", len(orders), func(i int) (weChatRequest, error) { return weChatNotice(k, orders[i], i, paid) })
}

// weChatNotice is o's notification, with the fields a real one carries.
// Its transaction_id is made from o's trade number, unique in the run: a
// number from seq alone (which restarts at 0 for every cell) made every
// level after the first, and the profile, conflict with the first's.
func weChatNotice(k weChatKeys, o order, seq int, paid string) (weChatRequest, error) {
	fen, err := strconv.ParseInt(strings.Replace(o.amount, ".", "", 1), 10, 64)
	if err != nil {
		return weChatRequest{}, err
	}
	res, err := json.Marshal(map[string]any{
		"appid": benchWxAppID, "mchid": benchMchID, "out_trade_no": o.sn,
		"transaction_id": "4200" + o.tradeNo, "trade_type": "NATIVE", "trade_state": "SUCCESS",
		"trade_state_desc": "支付成功", "bank_type": "OTHERS", "attach": "", "success_time": paid,
		"payer":  map[string]string{"openid": fmt.Sprintf("oUpF8uMuAJO_M2pxb1Q9zN%06d", seq%1000000)},
		"amount": map[string]any{"total": fen, "payer_total": fen, "currency": "CNY", "payer_currency": "CNY"},
	})
	if err != nil {
		return weChatRequest{}, err
	}
	nonce := make([]byte, 6)
	rand.Read(nonce)
	body, err := fakewechatpay.Body{
		ID: fmt.Sprintf("EV-%012d-%s", seq, o.sn), EventType: "TRANSACTION.SUCCESS", Summary: "支付成功",
		CreateTime: time.Now(), OriginalType: "transaction", Nonce: hex.EncodeToString(nonce), Resource: res,
	}.Seal(k.apiV3Key)
	if err != nil {
		return weChatRequest{}, err
	}
	g, err := fakewechatpay.SignNotification(k.private, benchPublicKeyID, time.Now(), body)
	if err != nil {
		return weChatRequest{}, err
	}
	h := make(http.Header)
	g.Set(h)
	var lines strings.Builder
	for _, name := range []string{"Wechatpay-Timestamp", "Wechatpay-Nonce", "Wechatpay-Serial", "Wechatpay-Signature-Type", "Wechatpay-Signature"} {
		lines.WriteString(name + ": " + h.Get(name) + "\r\n")
	}
	return weChatRequest{header: []byte(lines.String()), body: body}, nil
}

// weChatOps makes workers that post reqs[order[i]] to /wechatpay/notify
// and want 204 with no body, round-robin over addrs as notifyOps does.
func weChatOps(addrs []string, reqs []weChatRequest, order []int) func() (op, func(), error) {
	return func() (op, func(), error) {
		clients := make([]*httpClient, len(addrs))
		for k, addr := range addrs {
			clients[k] = newJSONClient(addr, "/wechatpay/notify")
		}
		o := func(ctx context.Context, i int) error {
			r := reqs[order[i]]
			answer, err := clients[i%len(clients)].postWith(ctx, r.header, r.body, http.StatusNoContent)
			if err != nil {
				return err
			}
			if len(answer) != 0 {
				return fmt.Errorf("204 with a body %q", clip(answer))
			}
			return nil
		}
		closeAll := func() {
			for _, c := range clients {
				c.close()
			}
		}
		return o, closeAll, nil
	}
}
