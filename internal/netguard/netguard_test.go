package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"paynotify/internal/netguard"
)

// TestPublicOnlyRefusesPrivateAddresses dials addresses no provider URL may
// name; none is reachable, whether a name or a literal, and nothing is
// dialled (169.254.169.254 and 10.0.0.1 would hang if it were).
func TestPublicOnlyRefusesPrivateAddresses(t *testing.T) {
	dial := netguard.DialContext(netguard.PublicOnly)
	for _, addr := range []string{
		"127.0.0.1:443", "localhost:443", "[::1]:443", "[::ffff:127.0.0.1]:443",
		"169.254.169.254:80", "[fe80::1]:443", "[fd00:ec2::254]:80", "100.100.100.200:80",
		"10.0.0.1:443", "172.16.0.1:443", "192.168.1.1:443", "0.0.0.0:443",
		"8.8.8.8:22",
	} {
		t.Run(addr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := dial(ctx, "tcp", addr)
			if err == nil {
				c.Close()
				t.Fatalf("dialled %s", addr)
			}
			if !errors.Is(err, netguard.ErrRefused) {
				t.Fatalf("err = %v, want ErrRefused", err)
			}
		})
	}
}

// TestRefusalHidesThePort: a port with a listener and one without answer
// alike, so the error of a fetch cannot be used to scan.
func TestRefusalHidesThePort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	c := netguard.Client(netguard.PublicOnly, 5*time.Second)
	open := srv.Listener.Addr().String()
	errText := func(addr string) string {
		t.Helper()
		resp, err := c.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			t.Fatalf("fetched %s", addr)
		}
		if !errors.Is(err, netguard.ErrRefused) {
			t.Fatalf("err = %v, want ErrRefused", err)
		}
		return errors.Unwrap(err).Error()
	}
	// Both are refused before a connection: the texts differ only by the
	// address each names.
	_, openPort, _ := net.SplitHostPort(open)
	_, closedPort, _ := net.SplitHostPort(closed)
	got, want := errText(open), errText(closed)
	if got != "dial 127.0.0.1:"+openPort+": "+netguard.ErrRefused.Error() || want != "dial 127.0.0.1:"+closedPort+": "+netguard.ErrRefused.Error() {
		t.Fatalf("open: %q, closed: %q", got, want)
	}
}

// TestAnyAddressReachesLoopback is the development setting a fake provider
// on 127.0.0.1 needs.
func TestAnyAddressReachesLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	resp, err := netguard.Client(netguard.AnyAddress, 5*time.Second).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
