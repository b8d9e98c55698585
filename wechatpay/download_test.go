package wechatpay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"paynotify/internal/netguard"
	"paynotify/model"
	"paynotify/wechatpay"
)

// TestBillDownloadRefusesPrivateAddresses: with WeChat Pay's own gateway,
// the host of a bill's download_url is WeChat Pay's word, and the client
// dials it only at a public address: a URL naming 127.0.0.1 is refused
// before anything is dialled (the listener here never hears a request).
func TestBillDownloadRefusesPrivateAddresses(t *testing.T) {
	heard := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { heard <- struct{}{} }))
	defer srv.Close()
	c := newClient(t, clientConfig(t, true, false))
	link := wechatpay.BillLink{Day: time.Now(), DownloadURL: srv.URL + "/v3/billdownload/file?token=x", HashType: "SHA1"}
	_, err := c.DownloadBill(context.Background(), link, &strings.Builder{})
	if !errors.Is(err, model.ErrGatewayUnknown) || !strings.Contains(err.Error(), netguard.ErrRefused.Error()) {
		t.Fatalf("download from %s: %v, want the refusal", srv.URL, err)
	}
	select {
	case <-heard:
		t.Fatal("the private address was dialled")
	default:
	}
}
