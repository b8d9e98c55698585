package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"paynotify/dao"
)

// serve and reconcile refuse a database whose schema is behind the
// binary, and start on one migrated.
func TestSchemaCurrent(t *testing.T) {
	ctx := context.Background()
	store, err := dao.Open(ctx, dao.DriverSQLite, filepath.Join(t.TempDir(), "schema.db"), dao.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := schemaCurrent(ctx, store); err == nil || !strings.Contains(err.Error(), "paynotify migrate") {
		t.Fatalf("unmigrated: %v, want the schema is behind", err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := schemaCurrent(ctx, store); err != nil {
		t.Fatalf("migrated: %v", err)
	}
}
