-- +goose Up
-- The same table as on MySQL, where it stops TRUNCATE of admin_audit.
-- SQLite has no TRUNCATE; what rewrites a row there is INSERT OR REPLACE,
-- whose delete the no-delete trigger stops because every connection of
-- the service turns recursive_triggers on (dao.SQLiteDSN).
CREATE TABLE admin_audit_guard (
    audit_id INTEGER NOT NULL PRIMARY KEY REFERENCES admin_audit (id)
);

-- +goose Down
DROP TABLE admin_audit_guard;
