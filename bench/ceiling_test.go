package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"
	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/model"
	"paynotify/service"
)

// The database-only ceiling stands for the service's group transaction,
// so it sends the service's statements: the same tables, columns,
// locks and clauses, in the same order. Recorded from the service
// itself (dao.Store.Trace) applying a group of first notices, and
// compared by shape (a list of marks is a list, whatever its length).
func TestCeilingSendsTheServiceStatements(t *testing.T) {
	dsn := os.Getenv("TEST_MYSQL_DSN")
	if dsn == "" {
		t.Skip("TEST_MYSQL_DSN is not set (e.g. root@tcp(127.0.0.1:3306)/)")
	}
	ctx := context.Background()
	server, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const name = "paynotify_bench_ceiling_test"
	if err := createDatabase(ctx, admin, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dropDatabase(context.Background(), admin, name) })
	store, err := dao.Open(ctx, dao.DriverMySQL, dsnFor(server, name, nil), dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsnFor(server, name, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	orders := makeOrders("CEILT-", 256)
	if err := seedOrders(ctx, db, orders); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex
		stmts []string
	)
	if err := store.Trace(func(sql string) {
		mu.Lock()
		defer mu.Unlock()
		stmts = append(stmts, shape(sql))
	}); err != nil {
		t.Fatal(err)
	}
	payments := service.NewPayments(store)

	// Eight notices at once: the first runs alone while the others queue
	// behind it and become a group. Again, on other orders, until a group
	// transaction was seen.
	const wave = 8
	var got []string
	for start := 0; start+wave <= len(orders) && got == nil; start += wave {
		mu.Lock()
		stmts = nil
		mu.Unlock()
		var wg sync.WaitGroup
		for i, o := range orders[start : start+wave] {
			wg.Go(func() {
				if _, outcome, err := payments.Observe(ctx, observation(o, start+i)); err != nil || outcome != model.OutcomeApplied {
					t.Errorf("%s: %s, %v; want applied", o.sn, outcome, err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		mu.Lock()
		got = groupStatements(stmts)
		mu.Unlock()
	}
	if got == nil {
		t.Fatal("no group transaction formed")
	}
	c := ceilingStatements(2)
	want := []string{shape(c.lookup), "BEGIN", shape(c.lock), shape(c.insertPay), shape(c.payOrders), shape(c.insertOut), "COMMIT"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the ceiling's statements are not the service's group transaction (-ceiling +service):\n%s", diff)
	}
}

// observation is the bench's notice of o, as the service reads it.
func observation(o order, seq int) model.Observation {
	paid := time.Now().UTC().Truncate(time.Second)
	return model.Observation{Provider: model.ProviderAlipay, TradeNo: o.tradeNo, OutTradeNo: o.sn,
		Amount: decimal.RequireFromString(o.amount), PaidAt: &paid, Ref: fmt.Sprintf(baseNotifyFmt, seq),
		Account: benchSellerID, App: benchAppID, Status: "TRADE_SUCCESS"}
}

// groupStatements finds a group transaction among what the service ran:
// its lookup (of many trades at once) through its COMMIT.
func groupStatements(stmts []string) []string {
	for i, s := range stmts {
		if !strings.HasPrefix(s, "SELECT 'p' AS src, trade_no AS k,") {
			continue
		}
		for j := i + 1; j < len(stmts); j++ {
			if stmts[j] == "COMMIT" {
				return stmts[i : j+1]
			}
		}
	}
	return nil
}

var (
	markLists = regexp.MustCompile(`\((\?,)*\?\)(,\((\?,)*\?\))*`)
	whenLists = regexp.MustCompile(`CASE id( WHEN \? THEN \?)+ END`)
)

// shape is a statement with its lists of marks (a row, rows, an IN list,
// a CASE's arms) written once, whatever their length.
func shape(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	s = whenLists.ReplaceAllString(s, "CASE id WHEN ? THEN ? END")
	return markLists.ReplaceAllString(s, "(…)")
}
