package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// benchAdminToken is the ADMIN_TOKEN of -webhooks' service.
const benchAdminToken = "bench-admin-token-0123456789abcdef"

// hookSink is a receiver of the run's own on loopback: a healthy one
// records when each event first arrived (its lag behind the event's time,
// the payload's timestamp); a hanging one holds every request until the
// service gives up on it.
type hookSink struct {
	name string
	srv  *http.Server
	url  string
	hang bool
	mu   sync.Mutex
	lag  map[string]time.Duration // by webhook-id, the first arrival
	seen atomic.Int64             // requests, retries included
}

func startSink(name string, hang bool) (*hookSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &hookSink{name: name, hang: hang, url: "http://" + ln.Addr().String() + "/hook", lag: map[string]time.Duration{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *hookSink) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	s.seen.Add(1)
	body, _ := io.ReadAll(r.Body)
	if s.hang {
		<-r.Context().Done()
		return
	}
	var p struct{ Timestamp time.Time }
	if err := json.Unmarshal(body, &p); err == nil && !p.Timestamp.IsZero() {
		id := r.Header.Get("webhook-id")
		s.mu.Lock()
		if _, dup := s.lag[id]; !dup {
			s.lag[id] = now.Sub(p.Timestamp)
		}
		s.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// lags is how far behind its event each distinct delivery arrived, sorted.
func (s *hookSink) lags() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, 0, len(s.lag))
	for _, d := range s.lag {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

func (s *hookSink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	_ = s.srv.Close()
}

// hookPhase is one paced run of first notices.
type hookPhase struct {
	name string
	res  result
	rate float64 // achieved, notices a second
}

// webhookReport is what -webhooks measured.
type webhookReport struct {
	target, seconds int
	phases          []hookPhase
	healthy         []*hookSink
	hanging         *hookSink
	events          int // order.paid events the webhook phase committed
	drained         time.Duration
	pendingHanging  int64
	invariant       string
	peakRSS         int64
}

// measureWebhooks runs -webhooks: one serve process with webhooks on,
// first notices paced at -webhooks-rate for -webhooks-seconds, once with
// no endpoint, once with one that hangs every request, and once with
// three (two healthy receivers beside the hanging one), in the same run on
// the same process; then the delivery lag to the healthy ones.
func (b *bench) measureWebhooks(ctx context.Context) (*webhookReport, error) {
	svcDB, err := sql.Open("mysql", dsnFor(b.server, b.svcDB, nil))
	if err != nil {
		return nil, err
	}
	defer svcDB.Close()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := append(b.serviceEnv(addr), "WEBHOOK_SECRET_KEY="+base64.StdEncoding.EncodeToString(key),
		"WEBHOOK_ALLOW_PRIVATE=true", "ADMIN_TOKEN="+benchAdminToken)
	b.progress("starting paynotify serve on %s with webhooks on", addr)
	svc, err := startProcess(ctx, b.bin, []string{"serve"}, env, addr, filepath.Join(b.tmp, "serve-webhooks.log"))
	if err != nil {
		return nil, err
	}
	defer svc.stop()

	rep := &webhookReport{target: b.opt.hookRate, seconds: b.opt.hookSeconds}
	n := b.opt.hookRate * b.opt.hookSeconds
	sent := 0
	phase := func(name, prefix string) error {
		orders := makeOrders(prefix, b.opt.warmup+n)
		if err := seedOrders(ctx, svcDB, orders); err != nil {
			return err
		}
		bodies, err := b.sign(ctx, b.mainApps(), orders)
		if err != nil {
			return err
		}
		sent += len(orders)
		if b.opt.warmup > 0 {
			if _, err := drive(ctx, 32, b.opt.warmup, notifyOps([]string{addr}, bodies, seq(0, b.opt.warmup))); err != nil {
				return err
			}
		}
		b.progress("%s: %d first notices paced at %d/s", name, n, b.opt.hookRate)
		res, err := pace(ctx, b.opt.hookRate, n, notifyOps([]string{addr}, bodies, seq(b.opt.warmup, len(bodies))))
		if err != nil {
			return err
		}
		p := hookPhase{name: name, res: res, rate: res.throughput()}
		b.progress("%s: %.0f/s achieved, p50 %.2f ms, p99 %.2f ms, fails %d", name, p.rate, ms(res.quantile(.5)), ms(res.quantile(.99)), res.fails)
		rep.phases = append(rep.phases, p)
		return nil
	}
	if err := phase("no endpoint", "WA"); err != nil {
		return nil, err
	}

	// The hanging endpoint alone first: what a dead receiver costs the
	// notices, with no delivery work beside it. Then two healthy ones
	// beside it: the fan-out and 2 deliveries an event on the same cores.
	add := func(name string, hang bool) error {
		s, err := startSink(name, hang)
		if err != nil {
			return err
		}
		if err := registerEndpoint(ctx, addr, s.url); err != nil {
			s.close()
			return err
		}
		if hang {
			rep.hanging = s
		} else {
			rep.healthy = append(rep.healthy, s)
		}
		return nil
	}
	defer func() {
		for _, s := range append(rep.healthy, rep.hanging) {
			if s != nil {
				s.close()
			}
		}
	}()
	if err := add("endpoint 3", true); err != nil {
		return nil, err
	}
	if err := phase("one endpoint, hanging", "WH"); err != nil {
		return nil, err
	}
	for _, name := range []string{"endpoint 1", "endpoint 2"} {
		if err := add(name, false); err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	if err := phase("three endpoints, one hanging", "WB"); err != nil {
		return nil, err
	}
	rep.events = b.opt.warmup + n
	// Wait for the healthy endpoints to have every event of the phase.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		done := true
		for _, s := range rep.healthy {
			if len(s.lags()) < rep.events {
				done = false
			}
		}
		if done || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	rep.drained = time.Since(t0)
	if err := svcDB.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_delivery d JOIN webhook_endpoint e ON e.id = d.endpoint_id
		WHERE e.url = ? AND d.state = 'PENDING'`, rep.hanging.url).Scan(&rep.pendingHanging); err != nil {
		return nil, err
	}
	if rep.peakRSS, err = svc.peakRSS(); err != nil {
		return nil, err
	}
	if err := svc.stop(); err != nil {
		b.progress("service stop: %v", err)
	}
	if rep.invariant, err = checkApplied(ctx, svcDB, sent); err != nil {
		return nil, err
	}
	return rep, nil
}

// registerEndpoint creates an endpoint for every event type at url
// through the admin API.
func registerEndpoint(ctx context.Context, addr, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/admin/webhook-endpoints",
		strings.NewReader(`{"url":"`+url+`","event_types":["*"],"description":"bench"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+benchAdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("create endpoint %s: HTTP %d %s", url, resp.StatusCode, clip(body))
	}
	return nil
}

// pace sends requests 0..n-1 at rate a second (an open loop, as the
// provider sends: a slow answer does not slow the next request), each
// timed from when it was due, so queueing counts. At most 512 are in
// flight; past that, requests wait, and their latency shows it.
func pace(ctx context.Context, rate, n int, newOp func() (op, func(), error)) (result, error) {
	const workers = 512
	due := make(chan int, n)
	lat := make([]time.Duration, n)
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	var (
		wg       sync.WaitGroup
		fails    atomic.Int64
		errOnce  sync.Once
		firstErr string
	)
	for range workers {
		o, closeOp, err := newOp()
		if err != nil {
			return result{}, err
		}
		wg.Go(func() {
			defer closeOp()
			for i := range due {
				at := start.Add(time.Duration(i) * interval)
				time.Sleep(time.Until(at))
				rctx, cancel := context.WithTimeout(ctx, requestTimeout)
				err := o(rctx, i)
				cancel()
				lat[i] = time.Since(at)
				if err != nil {
					fails.Add(1)
					errOnce.Do(func() { firstErr = fmt.Sprintf("request %d: %v", i, err) })
				}
			}
		})
	}
	for i := range n {
		due <- i
	}
	close(due)
	wg.Wait()
	wall := time.Since(start)
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	slices.Sort(lat)
	return result{n: n, fails: fails.Load(), firstErr: firstErr, wall: wall, lat: lat}, nil
}

func (r *webhookReport) valid() bool {
	if r.invariant != "" {
		return false
	}
	for _, p := range r.phases {
		if p.res.fails > 0 {
			return false
		}
	}
	for _, s := range r.healthy {
		if len(s.lags()) < r.events {
			return false
		}
	}
	return true
}

func (r *webhookReport) write(w io.Writer, env envInfo) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "## Webhooks: %d first notices/s for %d s: no endpoint, one hanging, then 3 endpoints (one hanging)\n\n", r.target, r.seconds)
	fmt.Fprintf(&buf, "Machine: %s, %d cores, %s; MariaDB %s; commit %s; %s.\n\n", env.cpu, env.cores, env.kernel, env.mariadb, env.commit, env.when.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintln(&buf, "| run | notices/s achieved | notify p50 | notify p99 | fails |")
	fmt.Fprintln(&buf, "|---|---:|---:|---:|---:|")
	for _, p := range r.phases {
		fmt.Fprintf(&buf, "| %s | %.0f | %.2f ms | %.2f ms | %d |\n", p.name, p.rate, ms(p.res.quantile(.5)), ms(p.res.quantile(.99)), p.res.fails)
	}
	fmt.Fprintln(&buf)
	fmt.Fprintln(&buf, "| endpoint | events delivered | lag p50 | lag p99 | lag max |")
	fmt.Fprintln(&buf, "|---|---:|---:|---:|---:|")
	for _, s := range r.healthy {
		l := s.lags()
		res := result{lat: l}
		worst := time.Duration(0)
		if len(l) > 0 {
			worst = l[len(l)-1]
		}
		fmt.Fprintf(&buf, "| %s (healthy) | %d of %d | %.0f ms | %.0f ms | %.0f ms |\n", s.name, len(l), r.events, ms(res.quantile(.5)), ms(res.quantile(.99)), ms(worst))
	}
	fmt.Fprintf(&buf, "| %s (hangs every request) | %d requests held, %d deliveries PENDING at the end | — | — | — |\n\n",
		r.hanging.name, r.hanging.seen.Load(), r.pendingHanging)
	fmt.Fprintf(&buf, "Lag is an event's arrival at the receiver less its time (the payload's `timestamp`, the commit of the notice). Every healthy delivery arrived within %v of the webhook phase's start. Peak RSS %.1f MiB.",
		r.drained.Round(time.Millisecond), float64(r.peakRSS)/(1<<20))
	if r.invariant != "" {
		fmt.Fprintf(&buf, " INVALID: %s.", r.invariant)
	}
	fmt.Fprintln(&buf)
	_, _ = w.Write(buf.Bytes())
}
