package alipay

import (
	"net/url"
	"testing"

	"paynotify/internal/netguard"
)

// RealSample is a notification Alipay really signed, with the key that
// verifies it, for the external tests in this directory.
type RealSample struct {
	Name      string
	Form      url.Values
	PublicKey string
}

// RealSamples loads testdata/alipay-real-samples.
func RealSamples(tb testing.TB) []RealSample {
	var out []RealSample
	for _, s := range loadSamples(tb) {
		out = append(out, RealSample{Name: s.name, Form: s.form, PublicKey: s.publicKey})
	}
	return out
}

// GuardDownloads makes c's bill downloads refuse private addresses, as a
// client whose gateway is not a fake does, while its gateway stays a fake
// on loopback.
func (c *Client) GuardDownloads() { c.billFetch = netguard.PublicOnly }
