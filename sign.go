package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"paynotify/alipay"
	"paynotify/fakewechatpay"
	"paynotify/wechatpay"
)

// setFlags collects repeated -set k=v.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

const signUsage = `usage: paynotify sign [-app NAME] [-key KEY.pem] [-set k=v ...] [FORM_FILE|-]
       paynotify sign -provider wechatpay [-key KEY.pem] [-serial SERIAL] [-url URL] [BODY_FILE|-]

Alipay (the default): reads a URL-encoded notification form (FORM_FILE, or
standard input), applies the -set changes, signs it by Alipay's rule and
prints the signed form, ready for curl --data @-. The default key is the
development "Alipay" key that paynotify dev trusts. -app NAME makes it
dev's app NAME's notification (web, the default, or mobile; or its app_id):
it sets app_id, auth_app_id and seller_id to that app's and signs with the
key Alipay signs that app's notifications with (in dev, the fake Alipay's
one key for every app).

WeChat Pay: reads a notification body (JSON, its resource already
encrypted, as in testdata/notify/wechatpay), signs it now (WeChat Pay's
timestamp must be within 5 minutes) and prints the curl command that posts
it to -url, ready for | sh: by default to the dev running in this
directory (the address it printed, which it keeps in paynotify-dev.db.url
while it runs), else to HTTP_ADDR, else to 127.0.0.1:8080. The default key
and serial are the development WeChat Pay public key's that paynotify dev
trusts. A JSON body without -provider wechatpay is refused, and so is
-app: a WeChat Pay merchant's appids share its keys and the appid is
inside the sealed resource (each dev app has its replay file).
`

// sign reads a URL-encoded form (a file, or standard input), applies -set
// changes, signs it by Alipay's rule and prints the signed form, ready for
// curl --data @-.
func sign(env environment) error {
	flags := newFlags("sign", signUsage)
	provider := flags.String("provider", "alipay", "alipay or wechatpay")
	keyFile := flags.String("key", "", "private key that signs (default: the development Alipay, or WeChat Pay, key, built in)")
	var sets setFlags
	flags.Var(&sets, "set", "`k=v` to set before signing (repeatable; k= empties a field, which Alipay's rule leaves unsigned; Alipay only)")
	serial := flags.String("serial", devWeChatPublicKeyID, "Wechatpay-Serial: the signing key's public key id or certificate serial (WeChat Pay only)")
	appName := flags.String("app", "", "dev's Alipay app whose notification this is: web (the default) or mobile, or its app_id (Alipay only)")
	to := flags.String("url", "", "where the curl command posts (WeChat Pay only; default: the running dev's /wechatpay/notify — the address in paynotify-dev.db.url, else HTTP_ADDR, else "+devDefaultAddr+")")
	if err := parseFlags(flags, env, 1); err != nil {
		return err
	}
	switch *provider {
	case "alipay":
	case "wechatpay":
		if len(sets) > 0 {
			return errors.New("-set is for Alipay forms; edit a WeChat Pay body before it is sealed (see forms_test.go)")
		}
		if *appName != "" {
			return refuseUsage(flags, env, errors.New("-app is for Alipay forms: a WeChat Pay merchant's appids share its keys, and the appid is inside the sealed resource (replay the app's own file, such as testdata/notify/wechatpay/13_pay_second_app_demo_1006.json)"))
		}
		key, err := signingKey(*keyFile, "wechatpay_private_key.pem")
		if err != nil {
			return err
		}
		if *to == "" {
			*to = devBaseURL(env.environ) + "/wechatpay/notify"
		}
		return signWeChat(env, flags.Arg(0), key, *serial, *to)
	default:
		return fmt.Errorf("-provider %q: want alipay or wechatpay", *provider)
	}
	body, err := readInput(env, flags.Arg(0))
	if err != nil {
		return err
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
		return refuseUsage(flags, env, errors.New("the body is JSON, a WeChat Pay notification, not an Alipay form: sign it with -provider wechatpay"))
	}
	form, err := url.ParseQuery(strings.TrimSpace(string(body)))
	if err != nil {
		return fmt.Errorf("form: %w", err)
	}
	if *appName != "" {
		app, err := devAlipayApp(*appName)
		if err != nil {
			return refuseUsage(flags, env, err)
		}
		form.Set("app_id", app.AppID)
		form.Set("auth_app_id", app.AppID)
		form.Set("seller_id", app.SellerID)
	}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("-set %q: want k=v", kv)
		}
		form.Set(k, v)
	}
	key, err := signingKey(*keyFile, "alipay_private_key.pem")
	if err != nil {
		return err
	}
	signed, err := alipay.SignForm(key, form)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(env.stdout, signed.Encode())
	return err
}

// devAlipayApp is dev's Alipay app named name (or whose app_id it is), as
// dev configures it (devProviderConfig).
func devAlipayApp(name string) (alipay.AppConfig, error) {
	var names []string
	for _, a := range devProviderConfig("", "").alipay {
		if a.Name == name || a.AppID == name {
			return a, nil
		}
		names = append(names, a.Name+" ("+a.AppID+")")
	}
	return alipay.AppConfig{}, fmt.Errorf("-app %q: dev's Alipay apps are %s", name, strings.Join(names, ", "))
}

// signingKey is the key in keyFile, or else the development key dev (built
// into the binary, so sign works from any directory).
func signingKey(keyFile, dev string) (string, error) {
	if keyFile == "" {
		return devKey(dev), nil
	}
	b, err := os.ReadFile(keyFile)
	return string(b), err
}

// readInput reads the file name, or standard input for "" or "-".
func readInput(env environment, name string) ([]byte, error) {
	var in io.Reader = env.stdin
	if name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	return io.ReadAll(io.LimitReader(in, 1<<20))
}

// signWeChat signs a WeChat Pay notification body now and prints the curl
// command that posts it with its Wechatpay-* headers.
func signWeChat(env environment, name, key, serial, to string) error {
	body, err := readInput(env, name)
	if err != nil {
		return err
	}
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return errors.New("the body is not JSON (a WeChat Pay notification body, as in testdata/notify/wechatpay)")
	}
	g, err := fakewechatpay.SignNotification(key, serial, time.Now(), body)
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	h := make(http.Header)
	g.Set(h)
	var b strings.Builder
	b.WriteString("curl -sS -i -X POST " + shellQuote(to) + " -H 'Content-Type: application/json'")
	for _, k := range []string{wechatpay.HeaderTimestamp, wechatpay.HeaderNonce, wechatpay.HeaderSerial, wechatpay.HeaderSignatureType, wechatpay.HeaderSignature} {
		b.WriteString(" -H " + shellQuote(k+": "+h.Get(k)))
	}
	b.WriteString(" --data-binary " + shellQuote(string(body)))
	_, err = fmt.Fprintln(env.stdout, b.String())
	return err
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
