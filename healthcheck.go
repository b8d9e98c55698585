package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"paynotify/config"
)

const healthcheckUsage = `usage: paynotify healthcheck [-path /readyz] [-timeout 3s] [-url URL]

Asks the service running on this machine at HTTP_ADDR (as serve reads it)
whether it is ready, and exits 0 if it answers 200, 1 otherwise. It is the
container health check: the distroless image has no shell or curl.
/readyz answers 200 when the database answers and can serve (it is not
read-only; on a Galera cluster, this instance's node is Synced), and a
503 says why; -path /healthz asks only
whether the process is alive.
`

// healthcheck GETs the service's readiness (or liveness) endpoint.
func healthcheck(ctx context.Context, env environment) error {
	flags := newFlags("healthcheck", healthcheckUsage)
	path := flags.String("path", "/readyz", "endpoint to ask: /readyz or /healthz")
	timeout := flags.Duration("timeout", 3*time.Second, "give up after this long")
	target := flags.String("url", "", "full URL to ask instead of HTTP_ADDR and -path")
	if err := parseFlags(flags, env, 0); err != nil {
		return err
	}
	url := *target
	if url == "" {
		cfg, err := config.Load(env.environ)
		if err != nil {
			return err
		}
		base, err := localURL(cfg.HTTPAddr)
		if err != nil {
			return err
		}
		url = base + *path
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %d %s", url, resp.StatusCode, body)
	}
	fmt.Fprintf(env.stdout, "%s: %s\n", url, body)
	return nil
}

// localURL is the base URL that reaches, from this machine, a server
// listening on addr: an empty or unspecified host means loopback.
func localURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("HTTP_ADDR %q: %w", addr, err)
	}
	// Go listens dual-stack on an unspecified address, "::" included.
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}
