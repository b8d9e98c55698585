// Package migrations holds the versioned SQL schema, one set per database
// family, embedded in the binary and applied with goose.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

//go:embed mysql/*.sql sqlite/*.sql
var files embed.FS

// Up applies every migration not yet applied. driver is "mysql" or "sqlite".
func Up(ctx context.Context, db *sql.DB, driver string) error {
	p, err := provider(db, driver)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", driver, err)
	}
	return nil
}

func provider(db *sql.DB, driver string) (*goose.Provider, error) {
	var dialect goose.Dialect
	switch driver {
	case "mysql":
		dialect = goose.DialectMySQL
	case "sqlite":
		dialect = goose.DialectSQLite3
	default:
		return nil, fmt.Errorf("migrate: unknown driver %q", driver)
	}
	sub, err := fs.Sub(files, driver)
	if err != nil {
		return nil, err
	}
	// Out of order: numbers are handed out ahead and land in any order, so
	// a database may hold 00012 without 00009 (each is independent of the
	// others); the one missing is applied, not refused.
	return goose.NewProvider(dialect, db, sub, goose.WithDisableGlobalRegistry(true), goose.WithAllowOutofOrder(true))
}

// Pending reports whether migrations remain to be applied.
func Pending(ctx context.Context, db *sql.DB, driver string) (bool, error) {
	p, err := provider(db, driver)
	if err != nil {
		return false, err
	}
	return p.HasPending(ctx)
}

// DownTo rolls back every migration after version: for tests of what a
// migration does to rows that are already there.
func DownTo(ctx context.Context, db *sql.DB, driver string, version int64) error {
	p, err := provider(db, driver)
	if err != nil {
		return err
	}
	if _, err := p.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrate %s down to %d: %w", driver, version, err)
	}
	return nil
}
