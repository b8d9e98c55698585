package dao_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/shopspring/decimal"

	"paynotify/dao"
	"paynotify/dao/daotest"
	"paynotify/internal/proctest"
	"paynotify/model"
)

// margin is how late after its deadline a call on a silent database may
// return: closing a connection and unwinding, never another wait.
const margin = time.Second

// silentStores returns a migrated MySQL store, a second store on the same
// database reached through a proxy that can go silent, and the proxy.
func silentStores(t *testing.T, opt dao.Options) (direct, proxied *dao.Store, proxy *proctest.Proxy) {
	t.Helper()
	ctx := context.Background()
	dsn := daotest.MySQLDatabase(t)
	direct, err := dao.Open(ctx, dao.DriverMySQL, dsn, dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	if err := direct.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy = proctest.NewProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	proxied, err = dao.Open(ctx, dao.DriverMySQL, cfg.FormatDSN(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxied.Close() })
	return direct, proxied, proxy
}

// checkBounded fails unless err says the database was unavailable and
// came within margin of the deadline.
func checkBounded(t *testing.T, what string, err error, start time.Time, deadline time.Duration) {
	t.Helper()
	took := time.Since(start)
	if !errors.Is(err, model.ErrUnavailable) {
		t.Errorf("%s: %v, want model.ErrUnavailable", what, err)
	}
	if took > deadline+margin {
		t.Errorf("%s returned after %v; the deadline was %v (+%v)", what, took.Round(time.Millisecond), deadline, margin)
	}
}

// go-sql-driver/mysql runs COMMIT and ROLLBACK without a context; the
// store still gives them up when the transaction's context ends, so a
// silent database cannot hold a request past its deadline (before: until
// the 30 s read timeout). The pool recovers once the database answers.
func TestSilentDatabaseEndsCommitAndRollbackWithTheContext(t *testing.T) {
	direct, proxied, proxy := silentStores(t, dao.Options{})
	ctx := context.Background()
	if _, err := direct.CreateOrder(ctx, "SILENT-TX-1", 1, decimal.RequireFromString("1.00")); err != nil {
		t.Fatal(err)
	}
	order := dao.OrderSN("SILENT-TX-1")
	const deadline = time.Second

	t.Run("Commit", func(t *testing.T) {
		committing := proxy.FreezeAfter([]byte("SILENT-TX-1"), []byte("\x03COMMIT"))
		tctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		start := time.Now()
		err := proxied.UpdateOrder(tctx, order, dao.ForUpdate, func(ctx context.Context, tx *dao.OrderTx, _ model.Order) error {
			_, err := tx.CloseOrder(ctx)
			return err
		})
		select {
		case <-committing:
		default:
			t.Fatalf("the transaction never sent COMMIT: %v", err)
		}
		checkBounded(t, "a transaction whose COMMIT gets no answer", err, start, deadline)
		proxy.Freeze(false)
	})

	t.Run("Rollback", func(t *testing.T) {
		tctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		start := time.Now()
		err := proxied.UpdateOrder(tctx, order, dao.ForUpdate, func(context.Context, *dao.OrderTx, model.Order) error {
			proxy.Freeze(true)
			return model.ErrUnavailable // anything: the transaction rolls back
		})
		checkBounded(t, "a transaction whose ROLLBACK gets no answer", err, start, deadline)
		proxy.Freeze(false)
	})

	t.Run("PoolRecovers", func(t *testing.T) {
		for i := range 3 { // more than the connections cut above
			if _, err := proxied.Order(ctx, "SILENT-TX-1"); err != nil {
				t.Fatalf("read %d after the database answers again: %v", i, err)
			}
		}
	})
}

// What no context bounds — a background job's statement — waits at most
// Options.IOTimeout on a silent database.
func TestSilentDatabaseBoundsUndeadlinedWaits(t *testing.T) {
	const ioTimeout = time.Second
	direct, proxied, proxy := silentStores(t, dao.Options{IOTimeout: ioTimeout})
	ctx := context.Background()
	if _, err := direct.CreateOrder(ctx, "SILENT-IO-1", 1, decimal.RequireFromString("1.00")); err != nil {
		t.Fatal(err)
	}
	if _, err := proxied.Order(ctx, "SILENT-IO-1"); err != nil { // a pooled connection
		t.Fatal(err)
	}
	proxy.Freeze(true)
	start := time.Now()
	_, err := proxied.Order(ctx, "SILENT-IO-1")
	checkBounded(t, "a read without a deadline", err, start, ioTimeout)
	proxy.Freeze(false)
}
