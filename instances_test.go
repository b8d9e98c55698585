package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/handler"
	"paynotify/internal/galeratest"
	"paynotify/internal/racetest"
	"paynotify/model"
)

// runAsMain, set in a process's environment, makes the test binary run
// the program itself (main) instead of the tests: how a test starts
// paynotify in processes of its own without building it again.
const runAsMain = "PAYNOTIFY_TEST_RUN_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsMain) == "1" {
		main() // exits
	}
	// As main does, for the tests that run the program in-process.
	if err := dao.RouteDriverLog(); err != nil {
		panic(err)
	}
	code := m.Run()
	galeratest.StopShared()
	os.Exit(code)
}

// instance is `paynotify serve` running in a process of its own.
type instance struct {
	base string // http://127.0.0.1:port
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
	// killed is set by kill9: the test meant the process to die.
	killed bool
}

// kill9 kills the instance with SIGKILL, as a crash would, and waits
// until it is gone.
func (in *instance) kill9(t *testing.T) {
	t.Helper()
	in.killed = true
	if err := in.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-in.done
}

// startInstance runs `paynotify serve` with environ (and nothing else) in
// a new process on a free loopback port, waits until it listens, and
// stops it with SIGTERM when the test ends. It may run in a goroutine of
// the test's, so it returns its error instead of failing the test.
func startInstance(t *testing.T, environ []string) (*instance, error) {
	return startProcess(t, "serve", "listening", environ)
}

// startProcess runs `paynotify command` as startInstance does, and waits
// until it logs the message ready (serve's "listening" line also sets
// the instance's base URL).
func startProcess(t *testing.T, command, ready string, environ []string) (*instance, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, command)
	// LOG_LEVEL INFO at least: the "listening" line says where.
	cmd.Env = append([]string{runAsMain + "=1", "HTTP_ADDR=127.0.0.1:0"}, append(environ, "LOG_LEVEL=INFO")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	in := &instance{cmd: cmd, log: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout = in.log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	// The JSON log's "listening" line names the port the kernel gave.
	addr := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			fmt.Fprintln(in.log, s.Text())
			var line struct{ Msg, Addr string }
			if json.Unmarshal(s.Bytes(), &line) == nil && line.Msg == ready {
				select {
				case addr <- line.Addr:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(in.done)
	}()
	t.Cleanup(func() {
		if in.killed {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-in.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-in.done
			t.Errorf("%s did not stop on SIGTERM:\n%s", command, in.log)
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 && !t.Failed() {
			t.Errorf("%s exited %d:\n%s", command, code, in.log)
		}
	})
	select {
	case a := <-addr:
		if a != "" {
			in.base = "http://" + a
		}
		return in, nil
	case <-in.done:
		return nil, fmt.Errorf("%s exited before it logged %q:\n%s", command, ready, in.log)
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("%s did not log %q in 60s:\n%s", command, ready, in.log)
	}
}

// twoInstances is two `serve` processes on one MariaDB database, with
// what a test needs to drive them: signed notifications and member
// tokens they accept, and the store behind both.
type twoInstances struct {
	inst      [2]*instance
	store     *dao.Store
	alipayKey string // signs notifications as Alipay
	token     string // member 1's bearer token
	secret    []byte // signs member tokens (API_JWT_SECRET)
	client    *http.Client
	environ   []string  // both instances', but for DB_DSN
	dsns      [2]string // instance i's DB_DSN
	// conflicts, on a Galera cluster, counts the transactions its nodes
	// have aborted for another node's conflicting write (certConflicts).
	conflicts func(t *testing.T) int
}

// logConflicts logs, when the test ends and ti is on a cluster, how many
// cross-node conflicts (1213, retried) the test met.
func (ti *twoInstances) logConflicts(t *testing.T) {
	if ti.conflicts == nil {
		return
	}
	before := ti.conflicts(t)
	t.Cleanup(func() { t.Logf("%d transactions aborted by a conflict with another node's", ti.conflicts(t)-before) })
}

// env is instance i's environment.
func (ti *twoInstances) env(i int) []string {
	return append(slices.Clone(ti.environ), "DB_DSN="+ti.dsns[i])
}

const (
	instancesAppID    = "2021000000000088"
	instancesSellerID = "2088000000000088"
	instancesMember   = 1
)

func startTwoInstances(t *testing.T) *twoInstances {
	t.Helper()
	dsn := daotest.MySQLDatabase(t)
	return startTwoInstancesOn(t, [2]string{dsn, dsn}, dsn)
}

// startTwoInstancesOn migrates the database once, through storeDSN
// (whose user may change the schema; the instances' may not need to), and
// starts instance i on dsns[i] (with extra in its environment); the
// test's own store reads and writes through storeDSN.
func startTwoInstancesOn(t *testing.T, dsns [2]string, storeDSN string, extra ...string) *twoInstances {
	t.Helper()
	ti := newInstancesOn(t, dsns, storeDSN, extra...)
	// Started together: each takes a while to come up under -race.
	var (
		wg   sync.WaitGroup
		errs [2]error
	)
	for i := range ti.inst {
		wg.Go(func() { ti.inst[i], errs[i] = startInstance(t, ti.env(i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
	}
	return ti
}

// newInstancesEnv is newInstancesOn with one database for everything.
func newInstancesEnv(t *testing.T, dsn string, extra ...string) *twoInstances {
	t.Helper()
	return newInstancesOn(t, [2]string{dsn, dsn}, dsn, extra...)
}

// newInstancesOn migrates the database and makes what two instances need
// (environment, keys, store), starting none.
func newInstancesOn(t *testing.T, dsns [2]string, storeDSN string, extra ...string) *twoInstances {
	t.Helper()
	appKey, _ := newKeyPair(t)
	alipayKey, alipayPub := newKeyPair(t)
	secret := "instances-test-jwt-secret-0123456789abcdef"
	environ := []string{
		"DB_DRIVER=mysql", "DB_MAX_OPEN_CONNS=16",
		"ALIPAY_APP_ID=" + instancesAppID, "ALIPAY_SELLER_ID=" + instancesSellerID,
		"ALIPAY_APP_PRIVATE_KEY=" + appKey, "ALIPAY_PUBLIC_KEY=" + alipayPub,
		"API_JWT_SECRET=" + secret,
		// Nothing in the background changes the orders under the races.
		"ORDER_PAY_TIMEOUT=24h", "ALIPAY_JOBS_INTERVAL=1h",
	}
	environ = append(environ, extra...)
	ti := &twoInstances{alipayKey: alipayKey, environ: environ, dsns: dsns,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	migrate := append(slices.Clone(environ), "DB_DSN="+storeDSN)
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: migrate, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	store, err := dao.Open(context.Background(), dao.DriverMySQL, storeDSN, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	token, err := handler.MemberToken([]byte(secret), instancesMember, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ti.store, ti.token, ti.secret = store, token, []byte(secret)
	return ti
}

// order creates an order of member 1 awaiting amount.
func (ti *twoInstances) order(t *testing.T, sn, amount string) {
	t.Helper()
	if _, err := ti.store.CreateOrder(context.Background(), sn, instancesMember, decimal.RequireFromString(amount)); err != nil {
		t.Fatalf("create order %s: %v", sn, err)
	}
}

// notification is Alipay's signed TRADE_SUCCESS for trade paying sn.
func (ti *twoInstances) notification(t *testing.T, sn, trade, amount string) string {
	t.Helper()
	form := url.Values{
		"app_id": {instancesAppID}, "seller_id": {instancesSellerID}, "notify_id": {"n-" + trade},
		"notify_type": {"trade_status_sync"}, "trade_status": {"TRADE_SUCCESS"}, "out_trade_no": {sn},
		"trade_no": {trade}, "total_amount": {amount}, "gmt_payment": {"2026-11-30 14:00:00"},
	}
	signed, err := alipay.SignForm(ti.alipayKey, form)
	if err != nil {
		t.Fatal(err)
	}
	return signed.Encode()
}

// notify posts a notification to instance i and returns the answer.
func (ti *twoInstances) notify(i int, body string) (string, error) {
	resp, err := ti.client.Post(ti.inst[i].base+"/alipay/notify", "application/x-www-form-urlencoded; charset=utf-8", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// deliver posts a notification to instance i as Alipay does: a
// "failure" answer (the service refused under load: a deadline spent on a
// 2-core CI machine, a deadlock retried to its limit) changed nothing, and
// Alipay resends the same notify_id, so deliver resends it a few times
// before it gives up and returns the last answer. Each refusal is logged,
// so a run shows how often the service said failure.
func (ti *twoInstances) deliver(t *testing.T, i int, body string) (string, error) {
	var answer string
	var err error
	for try := 1; try <= 5; try++ {
		answer, err = ti.notify(i, body)
		if err != nil || answer != "failure" {
			return answer, err
		}
		t.Logf("instance %d answered failure (try %d); resending as Alipay would", i, try)
		time.Sleep(time.Duration(try) * 50 * time.Millisecond)
	}
	return answer, err
}

// cancel asks instance i to cancel sn for member 1, through the order API,
// and returns the HTTP status.
func (ti *twoInstances) cancel(i int, sn string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, ti.inst[i].base+"/api/v1/orders/"+sn+"/cancel", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+ti.token)
	resp, err := ti.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// state reads sn back: the order and its payments.
func (ti *twoInstances) state(t *testing.T, sn string) (model.Order, []model.Payment) {
	t.Helper()
	o, err := ti.store.Order(context.Background(), sn)
	if err != nil {
		t.Fatalf("read order %s: %v", sn, err)
	}
	ps, err := ti.store.PaymentsByOrder(context.Background(), o.ID)
	if err != nil {
		t.Fatalf("payments of %s: %v", sn, err)
	}
	return o, ps
}

// together runs f(0) … f(n-1) at once and waits for all of them.
func together(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() { <-start; f(i) })
	}
	close(start)
	wg.Wait()
}

// The notify races of service/payment_test.go, across two `serve`
// processes on one MariaDB database instead of two pools in one process:
// what makes each of them safe is the database, not anything the
// processes share.
func TestNotifyRacesAcrossTwoInstances(t *testing.T) {
	raceInstances(t, startTwoInstances(t))
}

// raceInstances runs the races of TestNotifyRacesAcrossTwoInstances on
// ti: on one database, or on two nodes of a cluster.
func raceInstances(t *testing.T, ti *twoInstances) {

	// Hundreds of copies of one notification, half to each instance: one
	// APPLIED payment, the order paid once, every copy answered success.
	t.Run("IdenticalNotifications", func(t *testing.T) {
		ti.order(t, "INST-STORM", "100.00")
		body := ti.notification(t, "INST-STORM", "T-INST-STORM", "100.00")
		const n = 300
		answers, errs := make([]string, n), make([]error, n)
		together(n, func(i int) { answers[i], errs[i] = ti.notify(i%2, body) })
		for i := range n {
			if errs[i] != nil || answers[i] != "success" {
				t.Fatalf("copy %d (instance %d): %q, %v", i, i%2, answers[i], errs[i])
			}
		}
		o, ps := ti.state(t, "INST-STORM")
		if o.Status != model.OrderPaid || len(ps) != 1 || ps[0].State != model.PaymentApplied {
			t.Fatalf("order status %d, payments %+v; want paid by one APPLIED payment", o.Status, ps)
		}
	})

	// Two trades for one order, trade a to one instance and trade b to the
	// other: one APPLIED, the other REFUND_PENDING (ALREADY_PAID), until
	// each instance has won.
	t.Run("TwoTradesOneOrder", func(t *testing.T) {
		racetest.BothWays(t, "paid through instance 0", "paid through instance 1", func(t *testing.T, r int) (firstN, secondN int) {
			const orders = 40
			sns := make([]string, orders)
			bodies := make([]string, 2*orders)
			for k := range sns {
				sns[k] = fmt.Sprintf("INST-TRADES-%d-%d", r, k)
				ti.order(t, sns[k], "10.00")
				bodies[2*k] = ti.notification(t, sns[k], sns[k]+"-a", "10.00")
				bodies[2*k+1] = ti.notification(t, sns[k], sns[k]+"-b", "10.00")
			}
			answers, errs := make([]string, 2*orders), make([]error, 2*orders)
			// Request j: trade a (j even) to instance 0, trade b to instance 1.
			together(2*orders, func(j int) { answers[j], errs[j] = ti.deliver(t, j%2, bodies[j]) })
			for j := range answers {
				if errs[j] != nil || answers[j] != "success" {
					t.Fatalf("%s trade %c: %q, %v", sns[j/2], 'a'+j%2, answers[j], errs[j])
				}
			}
			for _, sn := range sns {
				o, ps := ti.state(t, sn)
				if racetest.PaidOnce(t, sn, o, ps) == sn+"-a" {
					firstN++
				} else {
					secondN++
				}
			}
			return firstN, secondN
		})
	})

	// The member's cancel (POST /api/v1/orders/{sn}/cancel) to one
	// instance racing the payment's notification to the other: paid with
	// the cancel refused (409), or closed with the money REFUND_PENDING
	// (ORDER_CLOSED) and the cancel done — never both, never money dropped.
	t.Run("CancelRacesPayment", func(t *testing.T) {
		racetest.BothWays(t, "paid first", "cancelled first", func(t *testing.T, r int) (paidN, closedN int) {
			const orders = 60
			sns := make([]string, orders)
			bodies := make([]string, orders)
			for k := range sns {
				sns[k] = fmt.Sprintf("INST-CLOSE-%d-%d", r, k)
				ti.order(t, sns[k], "5.00")
				bodies[k] = ti.notification(t, sns[k], "T-"+sns[k], "5.00")
			}
			statuses, cancelErrs := make([]int, orders), make([]error, orders)
			answers, notifyErrs := make([]string, orders), make([]error, orders)
			// Order k: the cancel to instance k%2, the notification to the
			// other one.
			together(2*orders, func(j int) {
				k := j / 2
				if j%2 == 0 {
					statuses[k], cancelErrs[k] = ti.cancel(k%2, sns[k])
				} else {
					answers[k], notifyErrs[k] = ti.deliver(t, 1-k%2, bodies[k])
				}
			})
			for k, sn := range sns {
				if notifyErrs[k] != nil || answers[k] != "success" {
					t.Fatalf("%s: notify: %q, %v", sn, answers[k], notifyErrs[k])
				}
				if cancelErrs[k] != nil {
					t.Fatalf("%s: cancel: %v", sn, cancelErrs[k])
				}
				o, ps := ti.state(t, sn)
				if len(ps) != 1 {
					t.Fatalf("%s: %d payments, want 1", sn, len(ps))
				}
				switch {
				case o.Status == model.OrderPaid && ps[0].State == model.PaymentApplied:
					paidN++
					if statuses[k] != http.StatusConflict {
						t.Fatalf("%s: paid, but the cancel answered %d", sn, statuses[k])
					}
				case o.Status == model.OrderClosed && ps[0].State == model.PaymentRefundPending && ps[0].Reason == model.RefundOrderClosed:
					closedN++
					if statuses[k] != http.StatusOK {
						t.Fatalf("%s: closed, but the cancel answered %d", sn, statuses[k])
					}
				default:
					t.Fatalf("%s: order status %d with payment %s/%s", sn, o.Status, ps[0].State, ps[0].Reason)
				}
			}
			return paidN, closedN
		})
	})
	// The same member's "place order" with one Idempotency-Key and one
	// body, to both instances at once (a client retrying on another
	// instance before the first answer came): one order, its stock
	// reserved and coupon and points spent once, both answered with it —
	// the creator's 201, the other its replay (Idempotent-Replayed), or a
	// 409 request_in_flight / conflict_retry that a resend turns into the
	// replay — until each instance has created one.
	t.Run("IdempotentCreate", func(t *testing.T) {
		ti.logConflicts(t)
		racetest.BothWays(t, "created by instance 0", "created by instance 1", func(t *testing.T, r int) (firstN, secondN int) {
			const cases = 30
			type placeCase struct {
				member, sku, coupon int64
				token, key          string
				body                string
			}
			cs := make([]placeCase, cases)
			for k := range cs {
				c := &cs[k]
				c.member, c.sku, c.coupon = ti.seedBuyer(t, fmt.Sprintf("idem-%d-%d", r, k), 1000, "5.00", "30.00", 10)
				c.token, c.key = ti.memberToken(t, c.member), fmt.Sprintf("idem-%d-%d", r, k)
				// 2 × 30.00 − 5.00 coupon − 500 points (5.00) = 50.00
				c.body = fmt.Sprintf(`{"items":[{"sku_id":%d,"quantity":2}],"coupon_id":%d,"use_integration":500}`, c.sku, c.coupon)
			}
			answers := make([]placeAnswer, 2*cases)
			// Request j: case j/2 to instance j%2.
			together(2*cases, func(j int) { c := cs[j/2]; answers[j] = ti.place(j%2, c.token, c.key, c.body) })
			resent := map[string]int{}
			for k, c := range cs {
				created, sn := -1, ""
				for i := range 2 {
					a := answers[2*k+i]
					if a.status == http.StatusConflict {
						resent[a.code]++
					}
					// A 409 that asks for a resend (the other still in flight,
					// or a conflict rolled back) is resent, as a client does.
					for try := 0; a.err == nil && a.status == http.StatusConflict && (a.code == "request_in_flight" || a.code == "conflict_retry") && try < 50; try++ {
						time.Sleep(20 * time.Millisecond) // well under Retry-After: the test need not wait a second
						a = ti.place(i, c.token, c.key, c.body)
					}
					if a.err != nil || a.status != http.StatusCreated || a.sn == "" {
						t.Fatalf("%s to instance %d: %d %s %q, %v", c.key, i, a.status, a.code, a.sn, a.err)
					}
					if sn != "" && a.sn != sn {
						t.Fatalf("%s: instance %d answered order %s, the other %s", c.key, i, a.sn, sn)
					}
					sn = a.sn
					if !a.replayed {
						if created >= 0 {
							t.Fatalf("%s: both instances answered a first 201 (no Idempotent-Replayed)", c.key)
						}
						created = i
					}
				}
				if created < 0 {
					t.Fatalf("%s: both answers are replays; which created %s?", c.key, sn)
				}
				ti.placedOnce(t, c.key, c.member, c.sku, c.coupon, 2, 500)
				if created == 0 {
					firstN++
				} else {
					secondN++
				}
			}
			t.Logf("round %d: %d keys, each created once; answered 409 first (then resent until replayed): %v", r, cases, resent)
			return firstN, secondN
		})
	})

	// Two members ordering the last unit of a SKU, one on each instance:
	// one order, the other answered 409 out_of_stock, the unit reserved
	// once and never more than the stock — until each instance has won.
	t.Run("LastUnitOfStock", func(t *testing.T) {
		ti.logConflicts(t)
		racetest.BothWays(t, "won by instance 0", "won by instance 1", func(t *testing.T, r int) (firstN, secondN int) {
			const cases = 30
			skus := make([]int64, cases)
			members, tokens := make([]int64, 2*cases), make([]string, 2*cases)
			for k := range skus {
				var err error
				if skus[k], err = ti.store.InsertSKU(context.Background(), fmt.Sprintf("last-%d-%d", r, k), decimal.RequireFromString("9.00"), 1); err != nil {
					t.Fatal(err)
				}
				for i := range 2 {
					if members[2*k+i], err = ti.store.InsertMember(context.Background(), fmt.Sprintf("last-%d-%d-%d", r, k, i), 0); err != nil {
						t.Fatal(err)
					}
					tokens[2*k+i] = ti.memberToken(t, members[2*k+i])
				}
			}
			answers := make([]placeAnswer, 2*cases)
			together(2*cases, func(j int) {
				answers[j] = ti.place(j%2, tokens[j], fmt.Sprintf("last-%d-%d", r, j),
					fmt.Sprintf(`{"items":[{"sku_id":%d,"quantity":1}]}`, skus[j/2]))
			})
			for k, id := range skus {
				won := -1
				for i := range 2 {
					a := answers[2*k+i]
					switch {
					case a.err == nil && a.status == http.StatusCreated && !a.replayed:
						if won >= 0 {
							t.Fatalf("sku %d: both instances sold its last unit", id)
						}
						won = i
					case a.err == nil && a.status == http.StatusConflict && a.code == "out_of_stock":
					default:
						t.Fatalf("sku %d, instance %d: %d %s, %v; want 201 or 409 out_of_stock", id, i, a.status, a.code, a.err)
					}
				}
				if won < 0 {
					t.Fatalf("sku %d: neither instance sold its last unit", id)
				}
				sku, err := ti.store.SKU(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				if sku.Stock != 1 || sku.LockStock != 1 {
					t.Fatalf("sku %d: stock %d, reserved %d; want 1 reserved of 1", id, sku.Stock, sku.LockStock)
				}
				for i := range 2 {
					want := 0
					if i == won {
						want = 1
					}
					if n := ti.ordersOf(t, members[2*k+i]); n != want {
						t.Fatalf("sku %d: member of instance %d has %d orders, want %d", id, i, n, want)
					}
				}
				if won == 0 {
					firstN++
				} else {
					secondN++
				}
			}
			return firstN, secondN
		})
	})

	if t.Failed() {
		for i, in := range ti.inst {
			t.Logf("instance %d log:\n%s", i, in.log)
		}
	}
}

// memberToken is a bearer token of member id that both instances accept.
func (ti *twoInstances) memberToken(t *testing.T, id int64) string {
	t.Helper()
	token, err := handler.MemberToken(ti.secret, id, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// seedBuyer adds a member called name with points and a coupon worth
// coupon, and a SKU at price with stock units.
func (ti *twoInstances) seedBuyer(t *testing.T, name string, points int, coupon, price string, stock int) (member, sku, couponID int64) {
	t.Helper()
	ctx := context.Background()
	var err error
	if member, err = ti.store.InsertMember(ctx, name, points); err != nil {
		t.Fatal(err)
	}
	if couponID, err = ti.store.InsertCoupon(ctx, member, decimal.RequireFromString(coupon)); err != nil {
		t.Fatal(err)
	}
	if sku, err = ti.store.InsertSKU(ctx, name, decimal.RequireFromString(price), stock); err != nil {
		t.Fatal(err)
	}
	return member, sku, couponID
}

// placeAnswer is what POST /api/v1/orders answered.
type placeAnswer struct {
	status   int
	sn       string // the order's, on a 201
	code     string // the error's
	replayed bool   // Idempotent-Replayed: true
	err      error
}

// place posts "place order" body with key, as the member of token, to
// instance i.
func (ti *twoInstances) place(i int, token, key, body string) placeAnswer {
	req, err := http.NewRequest(http.MethodPost, ti.inst[i].base+"/api/v1/orders", strings.NewReader(body))
	if err != nil {
		return placeAnswer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ti.client.Do(req)
	if err != nil {
		return placeAnswer{err: err}
	}
	defer resp.Body.Close()
	var b struct {
		OrderSN string `json:"order_sn"`
		Error   struct{ Code string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		return placeAnswer{status: resp.StatusCode, err: err}
	}
	return placeAnswer{status: resp.StatusCode, sn: b.OrderSN, code: b.Error.Code,
		replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
}

// ordersOf counts member's orders placed through the order API, those
// with lines: the notify races' orders (order) belong to member 1 without
// a member row, and a member seeded here may be given id 1.
func (ti *twoInstances) ordersOf(t *testing.T, member int64) int {
	t.Helper()
	var n int
	if err := ti.store.SQL().QueryRow("SELECT COUNT(*) FROM oms_order o WHERE o.member_id = ? AND EXISTS (SELECT 1 FROM oms_order_item i WHERE i.order_id = o.id)", member).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// placedOnce checks that the request key of member placed one order, of
// quantity units of sku with coupon and points of the member's 1,000
// (seedBuyer): the units reserved, the coupon used and the points spent
// once.
func (ti *twoInstances) placedOnce(t *testing.T, key string, member, sku, coupon int64, quantity, points int) {
	t.Helper()
	ctx := context.Background()
	if n := ti.ordersOf(t, member); n != 1 {
		t.Fatalf("%s: %d orders, want 1", key, n)
	}
	s, err := ti.store.SKU(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if s.LockStock != quantity {
		t.Fatalf("%s: %d units reserved, want %d", key, s.LockStock, quantity)
	}
	c, err := ti.store.Coupon(ctx, coupon)
	if err != nil {
		t.Fatal(err)
	}
	if c.UseStatus != model.CouponUsed {
		t.Fatalf("%s: coupon use status %d, want used", key, c.UseStatus)
	}
	left, err := ti.store.MemberPoints(ctx, member)
	if err != nil {
		t.Fatal(err)
	}
	if spent := 1000 - left; spent != points {
		t.Fatalf("%s: %d points spent, want %d", key, spent, points)
	}
}
