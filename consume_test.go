package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paynotify/broker"
	"paynotify/broker/natstest"
	"paynotify/dao"
	"paynotify/model"
)

// waitForJournal polls the journal of an order until it has want lines,
// and returns them.
func waitForJournal(t *testing.T, store *dao.Store, orderID int64, want int) []model.JournalLine {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		lines, err := store.JournalLines(context.Background(), orderID)
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) >= want {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %d has %d journal lines after 20s, want %d", orderID, len(lines), want)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// checkBookedPaid fails unless lines are an order.paid booked once:
// alipay_clearing debited and sales credited with amount.
func checkBookedPaid(t *testing.T, lines []model.JournalLine, amount string) {
	t.Helper()
	if len(lines) != 2 {
		t.Fatalf("journal %+v, want two lines", lines)
	}
	for _, l := range lines {
		switch {
		case l.EventType != model.EventOrderPaid:
			t.Fatalf("journal line %+v, want order.paid", l)
		case l.Account == model.AccountAlipayClearing && l.Debit.StringFixed(2) == amount && l.Credit.IsZero():
		case l.Account == model.AccountSales && l.Credit.StringFixed(2) == amount && l.Debit.IsZero():
		default:
			t.Fatalf("journal line %+v, want %s debited to %s or credited to %s", l, amount, model.AccountAlipayClearing, model.AccountSales)
		}
	}
}

// openSQLite opens a database file the program under test uses.
func openSQLite(t *testing.T, path string) *dao.Store {
	t.Helper()
	store, err := dao.Open(context.Background(), dao.DriverSQLite, path, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// `paynotify consume` against a real NATS JetStream: it books an event
// published to the stream, and stops when its context ends (SIGTERM).
// A private server: consume uses the production stream name.
func TestConsume(t *testing.T) {
	srv := natstest.Start(t)
	db := filepath.Join(t.TempDir(), "consume.db")
	environ := []string{"DB_DRIVER=sqlite", "DB_DSN=" + db, "NATS_URL=" + srv.URL()}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatalf("migrate: %v", err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, environment{args: []string{"consume"}, environ: environ, stdin: strings.NewReader(""), stdout: logs, stderr: logs})
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
			<-done
		}
	})

	b, err := broker.Connect(context.Background(), srv.URL(), broker.DefaultStream, broker.DefaultPrefix, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data, _ := json.Marshal(model.PaymentEventData{OrderID: 42, OrderSN: "CONSUME-42", Provider: string(model.ProviderAlipay),
		TradeNo: "2026120122001400000000042", OutTradeNo: "CONSUME-42", Amount: "12.30", State: string(model.PaymentApplied)})
	ev := model.Event{ID: "consume-test-1", Type: model.EventOrderPaid, AggregateID: 42, OccurredAt: time.Now().UTC(), Data: data}
	pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Publish(pctx, []model.Event{ev})[0]; err != nil {
		t.Fatalf("publish: %v", err)
	}

	checkBookedPaid(t, waitForJournal(t, openSQLite(t, db), 42, 2), "12.30")

	stop()
	stopped = true
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("consume stopped with %v\n%s", err, logs)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("consume still running 20s after its context ended\n%s", logs)
	}
	if !strings.Contains(logs.String(), "consumer running") {
		t.Errorf("consume did not say it runs:\n%s", logs)
	}
}

// Without NATS_URL consume refuses at once, naming it (with any other
// problem of the configuration), and touches nothing.
func TestConsumeRefusesWithoutNATS(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		want    []string
	}{
		{name: "NoNATSURL", want: []string{"NATS_URL is required"}},
		{name: "AndAMalformedValue", environ: []string{"NOTIFY_TIMEOUT=4"}, want: []string{"NATS_URL is required", "NOTIFY_TIMEOUT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "untouched.db")
			var out syncBuffer
			err := run(context.Background(), environment{args: []string{"consume"},
				environ: append([]string{"DB_DRIVER=sqlite", "DB_DSN=" + db}, tc.environ...),
				stdin:   strings.NewReader(""), stdout: &out, stderr: &out})
			if err == nil {
				t.Fatal("consume started without NATS_URL")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if _, err := os.Stat(db); err == nil {
				t.Error("consume created the database before refusing")
			}
		})
	}
}

// With NATS_URL, dev starts the accounting consumer beside the relay: a
// replayed payment travels outbox → relay → JetStream → consumer and is
// booked once, and the consumer's metric counts it.
func TestDevStartsTheConsumer(t *testing.T) {
	srv := natstest.Start(t)
	db := filepath.Join(t.TempDir(), "dev.db")
	base, logs := start(t, []string{"dev", "-db", db}, []string{"NATS_URL=" + srv.URL(), "ALIPAY_JOBS_INTERVAL=1h"})
	body, err := os.ReadFile(filepath.Join("testdata", "notify", "01_pay_demo_1001.form"))
	if err != nil {
		t.Fatal(err)
	}
	if got := post(t, base+"/alipay/notify", strings.TrimSpace(string(body))); got != "success" {
		t.Fatalf("notify answered %q", got)
	}
	store := openSQLite(t, db)
	o, err := store.Order(context.Background(), "DEMO-1001")
	if err != nil {
		t.Fatal(err)
	}
	checkBookedPaid(t, waitForJournal(t, store, o.ID, 2), "100.00")
	waitForMetrics(t, base, []string{`paynotify_accounting_events_total{result="booked"} 1`}, nil)
	if !strings.Contains(logs.String(), "accounting consumer started") {
		t.Errorf("dev did not say the consumer started:\n%s", logs)
	}
}

// consume started while NATS is down says that the broker cannot be
// reached and why (the dial's error), keeps saying it, and says it runs
// only once NATS answers.
func TestConsumeSaysNATSUnreachable(t *testing.T) {
	srv := natstest.Start(t)
	srv.Stop()
	db := filepath.Join(t.TempDir(), "consume.db")
	environ := []string{"DB_DRIVER=sqlite", "DB_DSN=" + db, "NATS_URL=" + srv.URL()}
	if err := run(context.Background(), environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, environment{args: []string{"consume"}, environ: environ, stdin: strings.NewReader(""), stdout: logs, stderr: logs})
	}()
	t.Cleanup(func() { stop(); <-done })
	waitLog := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for strings.Count(logs.String(), what) < n {
			if time.Now().After(deadline) {
				t.Fatalf("consume logged %q %d times, want %d:\n%s", what, strings.Count(logs.String(), what), n, logs)
			}
			time.Sleep(50 * time.Millisecond) // poll interval
		}
	}
	waitLog(`"msg":"nats cannot be reached: retrying every second until it answers","url"`, 2) // said at once, and again while it lasts
	if s := logs.String(); !strings.Contains(s, "connection refused") || strings.Contains(s, "consumer running") {
		t.Fatalf("while NATS is down:\n%s", s)
	}
	srv.Start()
	waitLog(`"msg":"consumer running"`, 1)
}
