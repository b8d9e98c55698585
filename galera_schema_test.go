package main

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"paynotify/dao"
	"paynotify/internal/galeratest"
)

// galeraForbidden is SQL Galera does not replicate or certify: table
// locks, named locks (both held on one node only) and XA transactions.
var galeraForbidden = regexp.MustCompile(`(?i)\bLOCK\s+TABLES?\b|\bGET_LOCK\s*\(|\bXA\s+(START|BEGIN|END|PREPARE|COMMIT|ROLLBACK|RECOVER)\b`)

// The schema and SQL stay fit for Galera: no source file or migration
// uses what Galera cannot replicate, and on a cluster migrated once,
// through node 1, every node sees the schema current (serve starts there),
// every table has a primary key (Galera replicates rows by it; deleting
// from a table without one is a full scan on every node) and is InnoDB
// (the only engine it replicates); a second migrate, on another node,
// does nothing. A store on a node runs its sessions with wsrep_sync_wait.
func TestGaleraSchema(t *testing.T) {
	var sources []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case strings.HasSuffix(path, ".sql") || strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			sources = append(sources, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sources) < 50 {
		t.Fatalf("found only %d source files and migrations", len(sources))
	}
	for _, path := range sources {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if m := galeraForbidden.Find(b); m != nil {
			t.Errorf("%s uses %q, which Galera does not replicate", path, m)
		}
	}

	c := galeratest.Shared(t)
	db := c.Database(t)
	ctx := context.Background()
	migrate := func(node int) {
		t.Helper()
		environ := []string{"DB_DRIVER=mysql", "DB_DSN=" + c.Nodes[node].DSN(db)}
		if err := run(ctx, environment{args: []string{"migrate"}, environ: environ, stdout: io.Discard, stderr: io.Discard}); err != nil {
			t.Fatalf("migrate through node %d: %v", node+1, err)
		}
	}
	migrate(0)
	var stores []*dao.Store
	for _, nd := range c.Nodes {
		store, err := dao.Open(ctx, dao.DriverMySQL, nd.DSN(db), dao.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		if err := schemaCurrent(ctx, store); err != nil {
			t.Fatalf("node %s after one migrate: %v", nd.Name, err)
		}
		// The store found a Galera node: its reads wait for the cluster.
		var wait int
		if err := store.SQL().QueryRowContext(ctx, "SELECT @@SESSION.wsrep_sync_wait").Scan(&wait); err != nil || wait != 1 {
			t.Fatalf("node %s: the store's sessions run with wsrep_sync_wait %d (%v), want 1", nd.Name, wait, err)
		}
		stores = append(stores, store)
	}
	versions := func() int {
		t.Helper()
		var n int
		if err := stores[2].SQL().QueryRow("SELECT COUNT(*) FROM goose_db_version").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := versions()
	migrate(1)
	if after := versions(); after != before {
		t.Fatalf("a second migrate, through node 2, recorded %d versions more", after-before)
	}

	rows, err := stores[1].SQL().QueryContext(ctx, `
		SELECT t.table_name, t.engine, COUNT(k.constraint_name)
		FROM information_schema.tables t
		LEFT JOIN information_schema.table_constraints k
		  ON k.table_schema = t.table_schema AND k.table_name = t.table_name AND k.constraint_type = 'PRIMARY KEY'
		WHERE t.table_schema = ? AND t.table_type = 'BASE TABLE'
		GROUP BY t.table_name, t.engine`, db)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	tables := 0
	for rows.Next() {
		var name, engine string
		var keys int
		if err := rows.Scan(&name, &engine, &keys); err != nil {
			t.Fatal(err)
		}
		tables++
		if keys != 1 {
			t.Errorf("table %s has no primary key", name)
		}
		if engine != "InnoDB" {
			t.Errorf("table %s is %s, which Galera does not replicate", name, engine)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if tables < 10 {
		t.Fatalf("node 2 has only %d tables", tables)
	}
}
