package dao_test

import (
	"database/sql"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"paynotify/dao"
	"paynotify/dao/daotest"
)

// column is what both migration sets must agree on; types differ by design
// (SQLite keeps money as TEXT).
type column struct {
	Name    string
	NotNull bool
	Key     bool // part of the primary key
}

// The MySQL and SQLite migrations describe the same tables, columns,
// nullability, primary keys and unique indexes.
func TestMigrationSetsAgree(t *testing.T) {
	sqliteStore := daotest.Open(t, dao.DriverSQLite)
	mysqlStore := daotest.Open(t, dao.DriverMySQL)
	lite, my := sqliteSchema(t, sqliteStore.SQL()), mysqlSchema(t, mysqlStore.SQL())
	if diff := cmp.Diff(my, lite); diff != "" {
		t.Errorf("schemas differ (-mysql +sqlite):\n%s", diff)
	}
	if len(lite.Tables) == 0 {
		t.Fatal("no tables found")
	}
}

type schema struct {
	Tables  map[string][]column
	Uniques []string // table(col,col)
}

func sqliteSchema(t *testing.T, db *sql.DB) schema {
	t.Helper()
	s := schema{Tables: map[string][]column{}}
	for _, table := range queryStrings(t, db, `SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' AND name != 'goose_db_version'`) {
		rows, err := db.Query(`SELECT name, "notnull", pk FROM pragma_table_info(?)`, table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var c column
			var pk int
			if err := rows.Scan(&c.Name, &c.NotNull, &pk); err != nil {
				t.Fatal(err)
			}
			c.Key = pk > 0
			s.Tables[table] = append(s.Tables[table], c)
		}
		rows.Close()
		for _, idx := range queryStrings(t, db, `SELECT name FROM pragma_index_list(?) WHERE "unique" = 1 AND origin = 'c'`, table) {
			cols := queryStrings(t, db, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, idx)
			s.Uniques = append(s.Uniques, table+"("+strings.Join(cols, ",")+")")
		}
	}
	sort.Strings(s.Uniques)
	return s
}

func mysqlSchema(t *testing.T, db *sql.DB) schema {
	t.Helper()
	s := schema{Tables: map[string][]column{}}
	rows, err := db.Query(`SELECT table_name, column_name, is_nullable = 'NO', column_key = 'PRI'
		FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name != 'goose_db_version'
		ORDER BY table_name, ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var table string
		var c column
		if err := rows.Scan(&table, &c.Name, &c.NotNull, &c.Key); err != nil {
			t.Fatal(err)
		}
		s.Tables[table] = append(s.Tables[table], c)
	}
	rows.Close()
	for _, u := range queryStrings(t, db, `SELECT CONCAT(table_name, '(', GROUP_CONCAT(column_name ORDER BY seq_in_index), ')')
		FROM information_schema.statistics WHERE table_schema = DATABASE() AND non_unique = 0 AND index_name != 'PRIMARY'
		AND table_name != 'goose_db_version' GROUP BY table_name, index_name`) {
		s.Uniques = append(s.Uniques, u)
	}
	sort.Strings(s.Uniques)
	return s
}

func queryStrings(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}
