package alipay

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"paynotify/internal/devkey"
	"paynotify/model"
)

func TestVerifyNotificationRealSamples(t *testing.T) {
	for _, s := range loadSamples(t) {
		t.Run(s.name+"/PublicKey", func(t *testing.T) {
			c := mustNew(t, sampleConfig(t, s))
			if err := c.VerifyNotification(context.Background(), s.form); err != nil {
				t.Fatalf("real notification refused: %v", err)
			}
		})
		if len(s.certs) == 0 {
			continue
		}
		t.Run(s.name+"/Certificate", func(t *testing.T) {
			cfg := sampleConfig(t, s)
			cfg.AlipayPublicKey = ""
			cfg.AlipayPublicCert = s.certs[0]
			c := mustNew(t, cfg)
			if err := c.VerifyNotification(context.Background(), s.form); err != nil {
				t.Fatalf("real notification refused: %v", err)
			}
		})
	}
}

func TestVerifyNotificationAltered(t *testing.T) {
	tests := []struct {
		name   string
		form   func(url.Values)
		config func(*Config)
		want   error // nil, model.ErrBadSignature or model.ErrWrongMerchant
	}{
		// An unknown SN must neither fail nor reach the network: the
		// client is in production mode, where smartwalle would download.
		{name: "CertSNAdded", form: func(f url.Values) { f.Set("alipay_cert_sn", "deadbeef") }},
		{name: "EmptyParamAdded", form: func(f url.Values) { f.Set("refund_fee", "") }},
		{name: "EmptyKeyAdded", form: func(f url.Values) { f.Set("", "") }},
		{name: "NonEmptyParamAdded", form: func(f url.Values) { f.Set("refund_fee", "0.01") }, want: model.ErrBadSignature},
		{name: "TamperedAmount", form: func(f url.Values) { f.Set("total_amount", "100.00") }, want: model.ErrBadSignature},
		{name: "ParamRemoved", form: func(f url.Values) { f.Del("gmt_payment") }, want: model.ErrBadSignature},
		{name: "SignTypeRSA", form: func(f url.Values) { f.Set("sign_type", "RSA") }, want: model.ErrBadSignature},
		{name: "SignTypeLowercase", form: func(f url.Values) { f.Set("sign_type", "rsa2") }, want: model.ErrBadSignature},
		{name: "SignTypeMissing", form: func(f url.Values) { f.Del("sign_type") }, want: model.ErrBadSignature},
		{name: "SignMissing", form: func(f url.Values) { f.Del("sign") }, want: model.ErrBadSignature},
		{name: "SignEmpty", form: func(f url.Values) { f.Set("sign", "") }, want: model.ErrBadSignature},
		{name: "SignNotBase64", form: func(f url.Values) { f.Set("sign", "not base64!") }, want: model.ErrBadSignature},
		{name: "RepeatedKeySameValue", form: func(f url.Values) { f.Add("trade_status", f.Get("trade_status")) }, want: model.ErrBadSignature},
		{name: "RepeatedKeyOtherValue", form: func(f url.Values) { f.Add("out_trade_no", "someone-else") }, want: model.ErrBadSignature},
		{name: "RepeatedSign", form: func(f url.Values) { f.Add("sign", f.Get("sign")) }, want: model.ErrBadSignature},
		{name: "WrongAppID", config: func(c *Config) { c.AppID = "2021000000000000" }, want: model.ErrWrongMerchant},
		{name: "WrongSellerID", config: func(c *Config) { c.SellerID = "2088000000000000" }, want: model.ErrWrongMerchant},
	}
	for _, s := range loadSamples(t) {
		for _, tt := range tests {
			t.Run(s.name+"/"+tt.name, func(t *testing.T) {
				cfg := sampleConfig(t, s)
				if tt.config != nil {
					tt.config(&cfg)
				}
				form := clone(s.form)
				if tt.form != nil {
					tt.form(form)
				}
				c := mustNew(t, cfg)
				c.SDK().Client = &http.Client{Transport: noNetwork{t}}
				err := c.VerifyNotification(context.Background(), form)
				if tt.want == nil && err != nil {
					t.Fatalf("got %v, want success", err)
				}
				if tt.want != nil && !errors.Is(err, tt.want) {
					t.Fatalf("got %v, want %v", err, tt.want)
				}
			})
		}
	}
}

// noNetwork fails the test on any outbound call: verifying must use only
// the key loaded at start.
type noNetwork struct{ t *testing.T }

// RoundTrip fails the test and the request.
func (n noNetwork) RoundTrip(r *http.Request) (*http.Response, error) {
	n.t.Errorf("unexpected request to %s", r.URL.Host)
	return nil, errors.New("no network in tests")
}

// TestVerifyNotificationConcurrent runs many verifications at once on one
// Client, as the HTTP server does; -race watches smartwalle's state.
func TestVerifyNotificationConcurrent(t *testing.T) {
	s := loadSamples(t)[0]
	c := mustNew(t, sampleConfig(t, s))
	const n = 20
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { errs <- c.VerifyNotification(context.Background(), s.form) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func BenchmarkVerifyNotification(b *testing.B) {
	s := loadSamples(b)[0]
	c := mustNew(b, sampleConfig(b, s))
	ctx := context.Background()
	for b.Loop() {
		if err := c.VerifyNotification(ctx, s.form); err != nil {
			b.Fatal(err)
		}
	}
}

// Alipay's Java SDK leaves whitespace-only values out of the signed
// content, as it does empty ones: such a notification verifies, and adding
// a blank value to one signed without it still does — but nothing else
// changes what verifies.
func TestVerifyNotificationBlankValues(t *testing.T) {
	c := devClient(t)
	key := devkey.Read(t, "alipay_private_key.pem")

	javaStyle, err := SignForm(key, devForm()) // signed without "body"
	if err != nil {
		t.Fatal(err)
	}
	javaStyle.Set("body", "  ")
	if err := c.VerifyNotification(context.Background(), javaStyle); err != nil {
		t.Fatalf("whitespace-only value left out of the signed content: %v", err)
	}

	withBlank := devForm()
	withBlank.Set("body", " ")
	signed, err := SignForm(key, withBlank) // signed with "body= "
	if err != nil {
		t.Fatal(err)
	}
	if err := c.VerifyNotification(context.Background(), signed); err != nil {
		t.Fatalf("whitespace-only value in the signed content: %v", err)
	}
	signed.Set("body", "x")
	if err := c.VerifyNotification(context.Background(), signed); !errors.Is(err, model.ErrBadSignature) {
		t.Fatalf("blank replaced by a value: %v, want ErrBadSignature", err)
	}
}

// Alipay sorts the signed content by key; smartwalle, which verified
// notifications before, sorted "k=v" strings. They disagree when a key is a
// prefix of another followed by a byte below '=' ("x" and "x-1"): such a
// notification, signed by Alipay's rule, verifies.
func TestVerifyNotificationKeysSortAsKeys(t *testing.T) {
	c := devClient(t)
	form := devForm()
	form.Set("x", "1")
	form.Set("x-1", "2")
	signed, err := SignForm(devkey.Read(t, "alipay_private_key.pem"), form)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.VerifyNotification(context.Background(), signed); err != nil {
		t.Fatalf("signed by Alipay's rule, refused: %v", err)
	}
	signed.Set("x", "2")
	if err := c.VerifyNotification(context.Background(), signed); !errors.Is(err, model.ErrBadSignature) {
		t.Fatalf("altered: %v, want ErrBadSignature", err)
	}
}
