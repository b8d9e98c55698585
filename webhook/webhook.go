// Package webhook is the one package that knows Standard Webhooks
// (standardwebhooks.com): the whsec_ secrets and how they are kept sealed,
// the payload's shape, the webhook-id / webhook-timestamp /
// webhook-signature headers, and the HTTP request that carries one
// delivery. Signing is the official Go library's.
package webhook

import (
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Standard Webhooks' headers.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// Sign is the webhook-signature header for body under id at ts: one
// "v1,<base64>" entry per secret, space-separated (two during the day
// after a rotation, so a receiver that holds either verifies).
func Sign(secrets []string, id string, ts time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return "", fmt.Errorf("webhook secret: %w", err)
		}
		sig, err := wh.Sign(id, ts, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// UserAgent names paynotify and its version (the module's, or the VCS
// revision it was built from) to receivers.
func UserAgent() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		} else {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v = s.Value[:12]
				}
			}
		}
	}
	return "paynotify-webhooks/" + v + " (+https://www.standardwebhooks.com)"
}
