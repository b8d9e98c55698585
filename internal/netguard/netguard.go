// Package netguard dials only public addresses. Every URL the service
// fetches because a provider told it to (Alipay's bill download URL, and
// the next provider's) goes through a client made here, so a URL naming a
// loopback, private, link-local, shared or metadata address — directly,
// through a redirect, or through a name that resolves there, however often
// it is re-resolved — is refused before a connection is attempted.
//
// The check is code.dny.dev/ssrf's, which follows IANA's special-purpose
// registries for IPv4 and IPv6; it runs as the dialer's Control function,
// on the address actually being dialled after DNS resolution.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// Policy says which addresses a client may reach.
type Policy int

const (
	// PublicOnly refuses every address that is not public unicast, and
	// every port but 80 and 443. It is what a deployment uses.
	PublicOnly Policy = iota
	// AnyAddress lets a development or test setup reach a fake provider on
	// loopback. Only an explicit development setting selects it.
	AnyAddress
	// PublicAnyPort refuses every address that is not public unicast, on
	// any port: a merchant's webhook endpoint may listen on 8443.
	PublicAnyPort
)

// ErrRefused is the error of a dial to an address PublicOnly refuses. Its
// text is the same whatever is listening there, so an error never tells an
// open port from a closed one.
var ErrRefused = errors.New("address refused: not a public address and port")

// dialTimeout bounds the TCP connect, as net/http's default transport does.
const dialTimeout = 30 * time.Second

// DialContext returns a dial function for an http.Transport (or any other
// client) that enforces p on every connection it makes.
func DialContext(p Policy) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	if p == AnyAddress {
		return d.DialContext
	}
	guard := p.guardian()
	d.Control = func(network, address string, c syscall.RawConn) error {
		if err := guard.Safe(network, address, c); err != nil {
			return ErrRefused
		}
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if errors.Is(err, ErrRefused) {
			// net.OpError would add the address and the dialer's wording;
			// one fixed text says all there is to say.
			return nil, fmt.Errorf("dial %s: %w", addr, ErrRefused)
		}
		return conn, err
	}
}

func (p Policy) guardian() *ssrf.Guardian {
	if p == PublicAnyPort {
		return ssrf.New(ssrf.WithAnyPort())
	}
	return ssrf.New()
}

// CheckHost resolves host and refuses it (ErrRefused, naming the address)
// if any address it resolves to is one p would not dial: what a URL is
// checked against when it is registered, before the dial-time check that
// still decides every connection (a name may resolve elsewhere later).
func CheckHost(ctx context.Context, p Policy, host string, port int) error {
	if p == AnyAddress {
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", host, err)
	}
	guard := p.guardian()
	for _, a := range addrs {
		network := "tcp6"
		if a.Unmap().Is4() {
			network = "tcp4"
		}
		hp := net.JoinHostPort(a.Unmap().String(), fmt.Sprint(port))
		if err := guard.Safe(network, hp, nil); err != nil {
			return fmt.Errorf("%s resolves to %s: %w", host, a.Unmap(), ErrRefused)
		}
	}
	return nil
}

// Client returns an HTTP client whose every connection, redirects
// included, is made by DialContext(p). It uses no proxy from the
// environment: a proxy would make the dial the guard sees the proxy's.
// timeout bounds each whole request, as http.Client.Timeout does.
func Client(p Policy, timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = DialContext(p)
	return &http.Client{Transport: t, Timeout: timeout}
}
