package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"paynotify/alipay"
	"paynotify/model"
	"paynotify/wechatpay"
)

// runSign runs `paynotify sign args...` with stdin, and returns what it
// printed and its error.
func runSign(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), environment{
		args: append([]string{"sign"}, args...), stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut,
	})
	if err != nil && out.Len() > 0 {
		t.Errorf("sign failed (%v) but printed:\n%s", err, &out)
	}
	return out.String(), err
}

// verifier checks forms as the service does, trusting alipayPublicKey for
// the development merchant.
func verifier(t *testing.T, alipayPublicKey string) *alipay.Client {
	t.Helper()
	c, err := alipay.New(alipay.Config{
		AppID: devAppID, SellerID: devSellerID,
		AppPrivateKey: devKey("app_private_key.pem"), AlipayPublicKey: alipayPublicKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parseSigned parses sign's output: one form on one line.
func parseSigned(t *testing.T, out string) url.Values {
	t.Helper()
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("sign printed %q, want one line", out)
	}
	form, err := url.ParseQuery(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("sign printed no form: %v\n%s", err, out)
	}
	return form
}

// sameExceptSignature fails unless got has want's fields, with changes
// applied, besides the signature.
func sameExceptSignature(t *testing.T, got, want url.Values, changes map[string]string) {
	t.Helper()
	want = cloneForm(want)
	for k, v := range changes {
		want.Set(k, v)
	}
	got = cloneForm(got)
	for _, f := range []string{"sign", "sign_type"} {
		got.Del(f)
		want.Del(f)
	}
	if got.Encode() != want.Encode() {
		t.Fatalf("signed form\n%s\nwant\n%s", got.Encode(), want.Encode())
	}
}

// cloneForm copies a form.
func cloneForm(v url.Values) url.Values {
	c := url.Values{}
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

// sign signs a form — a file, or standard input — with the development
// "Alipay" key by default, after its -set changes: what it prints verifies
// as a notification from Alipay, and a changed byte does not.
func TestSign(t *testing.T) {
	const file = "testdata/notify/01_pay_demo_1001.form"
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	original, err := url.ParseQuery(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	// The original's fields, re-signed: sign must not keep the old
	// signature by accident.
	unsigned := cloneForm(original)
	unsigned.Del("sign")
	dev := verifier(t, devKey("alipay_public_key.pem"))

	cases := []struct {
		name    string
		stdin   string
		args    []string
		changes map[string]string
	}{
		{name: "File", args: []string{file}},
		{name: "StdinDash", stdin: unsigned.Encode(), args: []string{"-"}},
		{name: "StdinNoArgument", stdin: unsigned.Encode() + "\n"},
		{name: "Set", args: []string{"-set", "total_amount=0.01", "-set", "trade_no=2026113022001400000000009", file},
			changes: map[string]string{"total_amount": "0.01", "trade_no": "2026113022001400000000009"}},
		{name: "SetAddsAField", args: []string{"-set", "body=a gift", file}, changes: map[string]string{"body": "a gift"}},
		// k= empties a field: Alipay's rule leaves it out of the signed
		// content, and the form still verifies.
		{name: "SetEmpties", args: []string{"-set", "buyer_logon_id=", file}, changes: map[string]string{"buyer_logon_id": ""}},
		{name: "SetValueWithEquals", args: []string{"-set", "body=a=b", file}, changes: map[string]string{"body": "a=b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runSign(t, tc.stdin, tc.args...)
			if err != nil {
				t.Fatalf("sign: %v", err)
			}
			signed := parseSigned(t, out)
			sameExceptSignature(t, signed, original, tc.changes)
			if signed.Get("sign_type") != "RSA2" {
				t.Fatalf("sign_type %q, want RSA2", signed.Get("sign_type"))
			}
			if err := dev.VerifyNotification(context.Background(), signed); err != nil {
				t.Fatalf("the signed form does not verify with the development Alipay public key: %v", err)
			}
			if _, err := alipay.ParseNotification(signed.Get); err != nil {
				t.Fatalf("the signed form is no notification: %v", err)
			}
			tampered := cloneForm(signed)
			tampered.Set("total_amount", "999.99")
			if err := dev.VerifyNotification(context.Background(), tampered); !errors.Is(err, model.ErrBadSignature) {
				t.Fatalf("a tampered copy verified: %v", err)
			}
		})
	}

	// -key signs with another key: the service trusting the development
	// key refuses the result, one trusting that key's public half takes it.
	t.Run("Key", func(t *testing.T) {
		private, public := newKeyPair(t)
		keyFile := filepath.Join(t.TempDir(), "other.pem")
		if err := os.WriteFile(keyFile, []byte(private), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := runSign(t, "", "-key", keyFile, file)
		if err != nil {
			t.Fatalf("sign -key: %v", err)
		}
		signed := parseSigned(t, out)
		sameExceptSignature(t, signed, original, nil)
		if err := dev.VerifyNotification(context.Background(), signed); !errors.Is(err, model.ErrBadSignature) {
			t.Fatalf("signed with another key, verified with the development key: %v", err)
		}
		if err := verifier(t, public).VerifyNotification(context.Background(), signed); err != nil {
			t.Fatalf("does not verify with the signing key's public half: %v", err)
		}
	})
}

// sign works from any directory, as the docs' examples use it: the
// development key is built in, not a path relative to the repository.
func TestSignFromAnotherDirectory(t *testing.T) {
	raw, err := os.ReadFile("testdata/notify/01_pay_demo_1001.form")
	if err != nil {
		t.Fatal(err)
	}
	form := filepath.Join(t.TempDir(), "pay.form")
	if err := os.WriteFile(form, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	out, err := runSign(t, "", "-set", "trade_no=2026113022001400000000000009", form)
	if err != nil {
		t.Fatalf("sign outside the repository: %v", err)
	}
	if err := verifier(t, devKey("alipay_public_key.pem")).VerifyNotification(context.Background(), parseSigned(t, out)); err != nil {
		t.Fatalf("signed outside the repository, does not verify: %v", err)
	}
}

// What sign cannot do it says, and prints nothing.
func TestSignRefuses(t *testing.T) {
	const file = "testdata/notify/01_pay_demo_1001.form"
	notAKey := filepath.Join(t.TempDir(), "not-a-key.pem")
	if err := os.WriteFile(notAKey, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{name: "SetWithoutEquals", args: []string{"-set", "total_amount", file}, want: `-set "total_amount": want k=v`},
		{name: "SetWithoutKey", args: []string{"-set", "=1.00", file}, want: `-set "=1.00": want k=v`},
		{name: "MissingKeyFile", args: []string{"-key", "/no/such/key.pem", file}, want: "/no/such/key.pem"},
		{name: "NotAKey", args: []string{"-key", notAKey, file}, want: "key"},
		{name: "MissingForm", args: []string{"/no/such/form"}, want: "/no/such/form"},
		{name: "MalformedForm", stdin: "total_amount=%zz", want: "form"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runSign(t, tc.stdin, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("sign %v: %v, want an error saying %q", tc.args, err, tc.want)
			}
		})
	}
}

// sign -provider wechatpay prints a curl command that posts the body,
// signed now, with its Wechatpay-* headers: run by sh, it reaches a
// notify endpoint that verifies it as the service does.
func TestSignWeChatPay(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl: the printed command needs it")
	}
	client, err := wechatpay.New(wechatpay.Config{
		MchID: devWeChatMchID, AppID: devWeChatAppID, APIv3Key: devWeChatAPIv3Key,
		MerchantPrivateKey: devKey("wechatpay_merchant_private_key.pem"), MerchantSerial: devWeChatMerchantSerial,
		PublicKey: devKey("wechatpay_public_key.pem"), PublicKeyID: devWeChatPublicKeyID,
		PlatformCerts: []string{devKey("wechatpay_platform_cert.pem")},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := client.ReadNotification(r)
		if err == nil && (n.Payment == nil || n.Payment.OutTradeNo != "DEMO-1001") {
			err = fmt.Errorf("notification %+v", n)
		}
		got <- err
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	const file = "testdata/notify/wechatpay/01_pay_demo_1001.json"
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"PublicKey", "", []string{"-provider", "wechatpay", "-url", srv.URL, file}},
		{"Stdin", string(body), []string{"-provider", "wechatpay", "-url", srv.URL}},
		{"Certificate", "", []string{"-provider", "wechatpay", "-url", srv.URL, "-key", "testdata/dev/wechatpay_platform_private_key.pem", "-serial", devWeChatCertSerial, file}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runSign(t, tc.stdin, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh")
			cmd.Stdin = strings.NewReader(out)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("sh: %v\n%s", err, b)
			}
			if err := <-got; err != nil {
				t.Fatalf("the posted notification: %v", err)
			}
		})
	}
	t.Run("Refuses", func(t *testing.T) {
		for _, args := range [][]string{
			{"-provider", "wechatpay", "-set", "a=b", file},
			{"-provider", "unionpay", file},
			{"-provider", "wechatpay", "testdata/notify/01_pay_demo_1001.form"},
		} {
			if _, err := runSign(t, "", args...); err == nil {
				t.Errorf("sign %v: no error", args)
			}
		}
	})
}

// -app makes a form dev's named app's notification: its app_id and seller,
// signed so that the service's check of that app takes it; an app dev
// does not have, or -app for WeChat Pay, is refused and prints nothing.
func TestSignApp(t *testing.T) {
	form := "out_trade_no=DEMO-1005&trade_no=2026113022001488880000" + "9005&trade_status=TRADE_SUCCESS&total_amount=25.00&app_id=" + devAppID
	mobile, err := alipay.New(alipay.Config{AppID: devMobileAppID, SellerID: devSellerID,
		AppPrivateKey: devKey("app_mobile_private_key.pem"), AlipayPublicKey: devKey("alipay_public_key.pem")})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mobile", devMobileAppID} {
		out, err := runSign(t, form, "-app", name)
		if err != nil {
			t.Fatalf("-app %s: %v", name, err)
		}
		signed := parseSigned(t, out)
		if signed.Get("app_id") != devMobileAppID || signed.Get("auth_app_id") != devMobileAppID || signed.Get("seller_id") != devSellerID {
			t.Errorf("-app %s: app_id %q auth_app_id %q seller_id %q", name, signed.Get("app_id"), signed.Get("auth_app_id"), signed.Get("seller_id"))
		}
		if err := mobile.VerifyNotification(context.Background(), signed); err != nil {
			t.Errorf("-app %s: the mobile app's check refuses it: %v", name, err)
		}
		if err := verifier(t, devKey("alipay_public_key.pem")).VerifyNotification(context.Background(), signed); !errors.Is(err, model.ErrWrongMerchant) {
			t.Errorf("-app %s: the web app's check says %v, want another app's", name, err)
		}
	}
	if out, err := runSign(t, form, "-app", "shop"); err == nil || !strings.Contains(err.Error(), "web ("+devAppID+"), mobile ("+devMobileAppID+")") {
		t.Errorf("-app shop: %q %v, want refused naming dev's apps", out, err)
	}
	body, _ := os.ReadFile(filepath.Join("testdata", "notify", "wechatpay", "01_pay_demo_1001.json"))
	if out, err := runSign(t, string(body), "-provider", "wechatpay", "-app", "web"); err == nil || !strings.Contains(err.Error(), "-app is for Alipay forms") {
		t.Errorf("-app with WeChat Pay: %q %v, want refused", out, err)
	}
}
