package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"

	"paynotify/config"
	"paynotify/dao"
	"paynotify/model"
	"paynotify/service"
	"paynotify/webhook"
	"paynotify/webhook/listen"
)

// devWebhookKey is dev's WEBHOOK_SECRET_KEY unless one is given: base64
// of 32 public bytes, like the other dev keys never for real secrets.
var devWebhookKey = base64.StdEncoding.EncodeToString([]byte("paynotify-dev-webhook-key-32byt!"))

// devWebhookDescription names dev's demo endpoint; with -keep, dev finds
// the one it made last time by it.
const devWebhookDescription = "paynotify dev: the demo receiver (paynotify listen, in dev's process)"

// devListenPrefix starts every line the demo receiver prints on dev's
// standard output.
const devListenPrefix = "[listen] "

// devWebhookConfig gives cfg dev's webhook defaults: the dev key unless
// WEBHOOK_SECRET_KEY or its _FILE is set, and loopback endpoints allowed
// unless WEBHOOK_ALLOW_PRIVATE says otherwise.
func devWebhookConfig(cfg *config.Config, environ []string) {
	if cfg.Webhook.SecretKey == "" && cfg.Webhook.SecretKeyFile == "" {
		cfg.Webhook.SecretKey = devWebhookKey
	}
	if !setIn(environ, "WEBHOOK_ALLOW_PRIVATE") {
		cfg.Webhook.AllowPrivate = true
	}
}

// devReceiver is the demo endpoint dev registers and the in-process
// receiver (package webhook/listen) it points at.
type devReceiver struct {
	// endpoint is the demo endpoint's id, url its URL.
	endpoint int64
	url      string
	stop     func()
}

// startDevReceiver starts a webhook receiver on a loopback port, printing
// what it verifies to out (each line prefixed devListenPrefix), and
// registers it as an endpoint subscribed to every event type, or, with a
// kept database, points the demo endpoint made last time at it with a
// new secret. The receiver serves until stop or ctx ends.
func startDevReceiver(ctx context.Context, log *slog.Logger, cfg config.Config, store *dao.Store, out io.Writer) (*devReceiver, error) {
	key, err := cfg.Webhook.Key()
	if err != nil {
		return nil, err
	}
	keys, err := webhook.NewKeyring(key)
	if err != nil {
		return nil, fmt.Errorf("dev: WEBHOOK_SECRET_KEY: %w", err)
	}
	w := service.NewWebhooks(store, keys)
	w.AllowPrivate = cfg.Webhook.AllowPrivate

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("dev: the demo webhook receiver: %w", err)
	}
	url := "http://" + ln.Addr().String() + "/"
	e, secret, err := devEndpoint(ctx, w, url)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("dev: the demo webhook endpoint: %w", err)
	}
	rc, err := listen.New(listen.Config{Secret: secret, Out: &prefixWriter{w: out, prefix: devListenPrefix}})
	if err != nil {
		ln.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := listen.Serve(sctx, ln, rc); err != nil {
			log.Warn("the demo webhook receiver stopped", "err", err)
		}
	}()
	return &devReceiver{endpoint: e.ID, url: url, stop: func() { cancel(); <-done }}, nil
}

// devEndpoint registers the demo endpoint at url, subscribed to every
// event type, and answers its signing secret; the one a kept database
// already has is pointed at url and given a new secret instead.
func devEndpoint(ctx context.Context, w *service.Webhooks, url string) (model.WebhookEndpoint, string, error) {
	all := []string{model.WebhookAllEvents}
	endpoints, err := w.Endpoints(ctx)
	if err != nil {
		return model.WebhookEndpoint{}, "", err
	}
	for _, e := range endpoints {
		if e.Description != devWebhookDescription {
			continue
		}
		if _, err := w.Update(ctx, e.ID, service.EndpointInput{URL: &url}); err != nil {
			return e, "", err
		}
		return w.Rotate(ctx, e.ID)
	}
	desc := devWebhookDescription
	return w.Create(ctx, service.EndpointInput{URL: &url, EventTypes: &all, Description: &desc})
}

// prefixWriter writes each line written to it to w after prefix. The
// receiver writes whole lines in each Write.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

// Write implements io.Writer.
func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var buf bytes.Buffer
	for line := range bytes.Lines(b) {
		buf.WriteString(p.prefix)
		buf.Write(line)
	}
	if _, err := p.w.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}
