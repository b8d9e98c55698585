package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/shopspring/decimal"

	"paynotify/alipay"
	"paynotify/config"
	"paynotify/dao"
	"paynotify/model"
)

// devKeyFiles are the development keys: public on purpose, refused by serve.
//
//go:embed testdata/dev/*.pem
var devKeyFiles embed.FS

// The development merchant that the forms in testdata/notify are signed for.
const (
	devAppID    = "2021000000000001"
	devSellerID = "2088000000000001"
)

// demoOrder is an order `dev` seeds, matched by the forms in testdata/notify.
type demoOrder struct {
	sn       string
	memberID int64
	amount   string
	closed   bool
}

var demoOrders = []demoOrder{
	{sn: "DEMO-1001", memberID: 1, amount: "100.00"},
	{sn: "DEMO-1002", memberID: 1, amount: "88.00"},
	{sn: "DEMO-1003", memberID: 2, amount: "59.90", closed: true},
	{sn: "DEMO-1004", memberID: 2, amount: "0.01"},
}

// devKeys returns every development key, for serve to refuse.
func devKeys() []string {
	var keys []string
	entries, _ := fs.Glob(devKeyFiles, "testdata/dev/*.pem")
	for _, name := range entries {
		b, _ := devKeyFiles.ReadFile(name)
		keys = append(keys, string(b))
	}
	return keys
}

func devKey(name string) string {
	b, err := devKeyFiles.ReadFile("testdata/dev/" + name)
	if err != nil {
		panic(err) // embedded at build time: cannot be missing
	}
	return string(b)
}

// dev runs the service on a fresh embedded SQLite database with demo
// orders and the development keys, and prints how to replay a notification.
func dev(ctx context.Context, env environment) error {
	flags := flag.NewFlagSet("dev", flag.ContinueOnError)
	flags.SetOutput(env.stderr)
	dbPath := flags.String("db", "paynotify-dev.db", "SQLite file, recreated at every start")
	keep := flags.Bool("keep", false, "keep the database from the last run instead of starting fresh")
	if err := flags.Parse(env.args); err != nil {
		return err
	}
	cfg, err := config.Load(env.environ)
	if err != nil {
		return err
	}
	cfg.DBDriver, cfg.DBDSN = dao.DriverSQLite, *dbPath
	log := newLogger(env.stderr, cfg.LogLevel, false)

	if !*keep {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(*dbPath + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	store, err := dao.Open(ctx, dao.DriverSQLite, *dbPath, dao.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	if err := seedDemo(ctx, store); err != nil {
		return err
	}
	client, err := alipay.New(alipay.Config{
		AppID:           devAppID,
		SellerID:        devSellerID,
		AppPrivateKey:   devKey("app_private_key.pem"),
		AlipayPublicKey: devKey("alipay_public_key.pem"),
	})
	if err != nil {
		return err
	}
	log.Info("dev mode: development keys, demo orders seeded",
		"db", *dbPath, "app_id", devAppID, "seller_id", devSellerID, "orders", len(demoOrders))
	port := cfg.HTTPAddr
	if len(port) > 0 && port[0] == ':' {
		port = "localhost" + port
	}
	log.Info("try: curl --data @testdata/notify/pay_demo_1001.form http://" + port + "/alipay/notify")
	return listenAndServe(ctx, log, env, cfg, store, client)
}

// seedDemo inserts the demo orders that are not there yet.
func seedDemo(ctx context.Context, store *dao.Store) error {
	for _, d := range demoOrders {
		if _, err := store.Order(ctx, d.sn); err == nil {
			continue
		} else if !errors.Is(err, model.ErrOrderNotFound) {
			return err
		}
		o, err := store.CreateOrder(ctx, d.sn, d.memberID, decimal.RequireFromString(d.amount))
		if err != nil {
			return fmt.Errorf("seed %s: %w", d.sn, err)
		}
		if d.closed {
			if _, err := store.CloseOrder(ctx, o.ID); err != nil {
				return fmt.Errorf("seed %s: %w", d.sn, err)
			}
		}
	}
	return nil
}
