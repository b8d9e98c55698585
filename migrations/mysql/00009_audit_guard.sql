-- +goose Up
-- admin_audit's triggers stop UPDATE and DELETE, but TRUNCATE TABLE fires
-- no trigger. InnoDB refuses to truncate a table another table references
-- by a foreign key, even an empty one: this table exists only to hold that
-- reference. (A user without DROP on admin_audit cannot truncate it at
-- all: docs/production.md lists the grants serve needs.)
CREATE TABLE admin_audit_guard (
    audit_id BIGINT NOT NULL,
    PRIMARY KEY (audit_id),
    CONSTRAINT fk_admin_audit_guard_audit FOREIGN KEY (audit_id) REFERENCES admin_audit (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE admin_audit_guard;
