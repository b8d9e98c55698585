package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"paynotify/alipay"
	"paynotify/config"
)

// TestAppsConfiguration: the -apps processes' environment is one the
// service takes (PROVIDERS_FILE, none of the ALIPAY_* account variables
// beside it), and the file lists every app under the one seller with its
// own keys, as the service reads them.
func TestAppsConfiguration(t *testing.T) {
	const n = 3
	ctx := context.Background()
	apps, err := newApps(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	k, err := newKeys()
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{opt: options{pool: 4}, server: mysql.NewConfig(), svcDB: "bench", keys: k, apps: apps}
	if b.providersFile, err = writeProvidersFile(filepath.Join(t.TempDir(), "apps"), apps); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(b.appsEnv("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := alipay.FromConfigApps(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d apps configured, want %d", len(got), n)
	}
	for i, app := range got {
		if app.AppID != apps[i].id || app.SellerID != benchSellerID || strings.TrimSpace(app.AlipayPublicKey) != strings.TrimSpace(apps[i].alipayPublic) {
			t.Errorf("app %d: %s of %s, want %s of %s with its own Alipay key", i, app.AppID, app.SellerID, apps[i].id, benchSellerID)
		}
	}
	if got[0].AppID != benchAppID || got[0].AppPrivateKey == got[1].AppPrivateKey {
		t.Errorf("the first app is %s (want %s), or two apps share a key", got[0].AppID, benchAppID)
	}
}
