package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// healthcheck exits 0 when the service answers, 1 when it is unready or
// not there: what the image's HEALTHCHECK and compose rely on.
func TestHealthcheck(t *testing.T) {
	base, _ := start(t, []string{"dev", "-db", filepath.Join(t.TempDir(), "dev.db")}, []string{"ALIPAY_JOBS_INTERVAL=1h"})
	addr := strings.TrimPrefix(base, "http://")
	unready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "database unreachable", http.StatusServiceUnavailable)
	}))
	defer unready.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	cases := []struct {
		name    string
		args    []string
		environ []string
		exit    int
		want    string // in stdout, or in the error
	}{
		{name: "Ready", environ: []string{"HTTP_ADDR=" + addr}, exit: 0, want: "/readyz: ready"},
		{name: "Alive", args: []string{"-path", "/healthz"}, environ: []string{"HTTP_ADDR=" + addr}, exit: 0, want: "/healthz: ok"},
		{name: "Unready", args: []string{"-url", unready.URL + "/readyz"}, exit: 1, want: "answered 503 database unreachable"},
		{name: "NothingListening", environ: []string{"HTTP_ADDR=" + closedAddr}, exit: 1, want: "connection refused"},
		{name: "BadHTTPAddr", environ: []string{"HTTP_ADDR=8080"}, exit: 1, want: `HTTP_ADDR "8080"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), environment{args: append([]string{"healthcheck"}, c.args...), environ: c.environ,
				stdout: &out, stderr: &errOut})
			if code := exitCode(err, &errOut); code != c.exit {
				t.Fatalf("exit %d, want %d: %v\n%s", code, c.exit, err, &errOut)
			}
			if got := out.String() + errOut.String(); !strings.Contains(got, c.want) {
				t.Errorf("output does not say %q:\n%s", c.want, got)
			}
		})
	}
}

// The address healthcheck asks is where the server listens, from inside
// its own container.
func TestLocalURL(t *testing.T) {
	for addr, want := range map[string]string{
		":8080":          "http://127.0.0.1:8080",
		"0.0.0.0:8080":   "http://127.0.0.1:8080",
		"[::]:8080":      "http://127.0.0.1:8080",
		"127.0.0.1:9000": "http://127.0.0.1:9000",
		"10.1.2.3:80":    "http://10.1.2.3:80",
		"[::1]:8080":     "http://[::1]:8080",
	} {
		if got, err := localURL(addr); err != nil || got != want {
			t.Errorf("localURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
}

// A flag value that does not parse says what the flag wants, not only
// "parse error".
func TestFlagParseErrorSaysWhatItWants(t *testing.T) {
	var errOut bytes.Buffer
	err := run(context.Background(), environment{args: []string{"healthcheck", "-timeout", "abc"}, stdin: strings.NewReader(""),
		stdout: io.Discard, stderr: &errOut})
	if exitCode(err, io.Discard) != 2 || !strings.Contains(errOut.String(), "want a duration with its unit, such as 5s") {
		t.Fatalf("healthcheck -timeout abc: %v\n%s", err, errOut.String())
	}
}
