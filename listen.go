package main

import (
	"context"
	"errors"
	"fmt"
	"net"

	"paynotify/webhook/listen"
)

const listenUsage = `usage: paynotify listen -secret whsec_... [-addr 127.0.0.1:9000] [-forward URL]

A local receiver of paynotify's webhooks, for the receiver's developer
(as stripe listen): point an endpoint at it (http://127.0.0.1:9000, with
WEBHOOK_ALLOW_PRIVATE=true on the sending side) and it verifies each
delivery with the official Standard Webhooks library and the endpoint's
signing secret, printing one line "verified <webhook-id> <type>" and then
the body; a delivery that does not verify is answered 401 and printed as
"refused <reason>". With -forward, each verified delivery is sent on to
URL, headers and body, and the receiver answers what URL answered.
See docs/webhooks.md.
`

// listenCmd serves a webhook receiver (package webhook/listen) until ctx
// ends.
func listenCmd(ctx context.Context, env environment) error {
	flags := newFlags("listen", listenUsage)
	secret := flags.String("secret", "", "the endpoint's signing secret, `whsec_...` (answered when it was created or its secret rotated)")
	addr := flags.String("addr", "127.0.0.1:9000", "address to listen on")
	forward := flags.String("forward", "", "send each verified delivery on to this http(s) `URL` and answer its status")
	if err := parseFlags(flags, env, 0); err != nil {
		return err
	}
	if *secret == "" {
		return refuseUsage(flags, env, errors.New("-secret is required: the endpoint's signing secret, whsec_..."))
	}
	rc, err := listen.New(listen.Config{Secret: *secret, Forward: *forward, Out: env.stdout})
	if err != nil {
		return refuseUsage(flags, env, err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	to := ""
	if *forward != "" {
		to = ", forwarding to " + *forward
	}
	fmt.Fprintf(env.stderr, "listening on http://%s for webhook deliveries%s (Ctrl-C stops)\n", ln.Addr(), to)
	if env.listening != nil {
		env.listening(ln.Addr().String())
	}
	return listen.Serve(ctx, ln, rc)
}
