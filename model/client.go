package model

import "context"

type clientAddrKey struct{}

// WithClientAddr is ctx carrying the address of the client a request came
// from, as the HTTP surface worked it out (the connection's, or what a
// trusted proxy said: TRUSTED_PROXIES), so that a handler mounted inside
// it counts, limits and logs the same address and never parses a
// forwarding header of its own.
func WithClientAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientAddrKey{}, addr)
}

// ClientAddr is the client address WithClientAddr put in ctx, if any.
func ClientAddr(ctx context.Context) (string, bool) {
	addr, ok := ctx.Value(clientAddrKey{}).(string)
	return addr, ok && addr != ""
}
