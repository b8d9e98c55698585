package config

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// Webhook is the WEBHOOK_* settings: signed HTTP deliveries of every
// event to the endpoints registered at /admin/webhook-endpoints.
type Webhook struct {
	// SecretKey (or the file SecretKeyFile names) is base64 of 32 random
	// bytes sealing the endpoints' signing secrets; unset, webhooks are
	// off.
	SecretKey     string `env:"WEBHOOK_SECRET_KEY"`
	SecretKeyFile string `env:"WEBHOOK_SECRET_KEY_FILE"`
	// Timeout is how long an endpoint has to answer 2xx.
	Timeout time.Duration `env:"WEBHOOK_TIMEOUT" envDefault:"15s"`
	// RetrySchedule is the waits before each retry, comma-separated.
	RetrySchedule string `env:"WEBHOOK_RETRY_SCHEDULE" envDefault:"5s,5m,30m,2h,5h,10h,10h"`
	// DisableAfter is how long an endpoint may fail every delivery before
	// it is disabled.
	DisableAfter time.Duration `env:"WEBHOOK_DISABLE_AFTER" envDefault:"5d"`
	// AllowPrivate lets endpoints be http:// and on loopback or private
	// addresses (development and tests).
	AllowPrivate bool `env:"WEBHOOK_ALLOW_PRIVATE" envDefault:"false"`
	// Retention is how long attempts, and finished deliveries, are kept.
	Retention time.Duration `env:"WEBHOOK_RETENTION" envDefault:"30d"`
	// Concurrency bounds each endpoint's requests in flight per instance.
	Concurrency int `env:"WEBHOOK_CONCURRENCY" envDefault:"4"`
}

// Key is the secret key, from WEBHOOK_SECRET_KEY or its _FILE ("" when
// webhooks are off).
func (w Webhook) Key() (string, error) {
	return ValueOrFile("WEBHOOK_SECRET_KEY", w.SecretKey, w.SecretKeyFile)
}

// Schedule parses RetrySchedule.
func (w Webhook) Schedule() ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(w.RetrySchedule, ",") {
		v, err := parseDuration(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		d := v.(time.Duration)
		if d <= 0 {
			return nil, fmt.Errorf("%q is not more than zero", part)
		}
		out = append(out, d)
	}
	return out, nil
}

// problems names the WEBHOOK_* values out of range.
func (w Webhook) problems() []string {
	var p []string
	if _, err := w.Schedule(); err != nil {
		p = append(p, fmt.Sprintf("WEBHOOK_RETRY_SCHEDULE=%q: want durations separated by commas, such as 5s,5m,30m (%v)", w.RetrySchedule, err))
	}
	if w.Timeout <= 0 || w.Timeout > 5*time.Minute {
		p = append(p, fmt.Sprintf("WEBHOOK_TIMEOUT=%v: want more than zero and at most 5m", w.Timeout))
	}
	if w.DisableAfter < 0 {
		p = append(p, "WEBHOOK_DISABLE_AFTER: want zero (never) or more")
	}
	if w.Retention < 24*time.Hour {
		p = append(p, fmt.Sprintf("WEBHOOK_RETENTION=%v: want at least 1d", w.Retention))
	}
	if w.Concurrency < 1 || w.Concurrency > 64 {
		p = append(p, fmt.Sprintf("WEBHOOK_CONCURRENCY=%d: want 1 to 64", w.Concurrency))
	}
	if key, err := w.Key(); err != nil {
		p = append(p, err.Error())
	} else if raw, err := base64.StdEncoding.DecodeString(key); key != "" && (err != nil || len(raw) != 32) {
		p = append(p, "WEBHOOK_SECRET_KEY: want base64 of 32 random bytes (openssl rand -base64 32)")
	}
	return p
}
