package fakealipay_test

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/url"
	"testing"

	"paynotify/fakealipay"
	"paynotify/internal/devkey"
)

// TestAnswerSigned pins the wire format without smartwalle in the way:
// {"<method>_response":{...},"sign":"..."}, the sign RSA2 over the exact
// bytes of the object between the key's colon and the comma.
func TestAnswerSigned(t *testing.T) {
	e := newEnv(t, nil)
	form := url.Values{
		"app_id":      {appID},
		"method":      {fakealipay.MethodQuery},
		"biz_content": {`{"out_trade_no":"ORD-404"}`},
	}
	resp, err := http.PostForm(e.fake.GatewayURL(e.gw.URL), form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}

	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	obj := raw["alipay_trade_query_response"]
	if !bytes.Contains(body, append([]byte(`{"alipay_trade_query_response":`), obj...)) {
		t.Fatalf("answer object not verbatim in %s", body)
	}
	var sign string
	if err := json.Unmarshal(raw["sign"], &sign); err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(sign)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode([]byte(devkey.Read(t, "alipay_public_key.pem")))
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(obj)
	if err := rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, digest[:], sig); err != nil {
		t.Fatalf("sign does not cover the object: %v", err)
	}

	var got struct {
		Code    string `json:"code"`
		SubCode string `json:"sub_code"`
	}
	if err := json.Unmarshal(obj, &got); err != nil {
		t.Fatal(err)
	}
	if got.Code != "40004" || got.SubCode != "ACQ.TRADE_NOT_EXIST" {
		t.Errorf("answer %s", obj)
	}
}
