-- +goose Up
-- The SQLite twin of mysql/00007.
CREATE TABLE admin_audit (
    id           INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    action_key   TEXT     NOT NULL,
    operator     TEXT     NOT NULL,
    action       TEXT     NOT NULL,
    order_id     INTEGER  NULL,
    target_kind  TEXT     NOT NULL DEFAULT '',
    target_id    TEXT     NOT NULL DEFAULT '',
    before_state TEXT     NOT NULL DEFAULT '',
    after_state  TEXT     NOT NULL DEFAULT '',
    note         TEXT     NOT NULL DEFAULT '',
    create_time  DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX uk_admin_audit_action_key ON admin_audit (action_key);
CREATE INDEX idx_admin_audit_order_id ON admin_audit (order_id);
CREATE INDEX idx_admin_audit_target ON admin_audit (target_kind, target_id);

-- +goose StatementBegin
CREATE TRIGGER admin_audit_no_update BEFORE UPDATE ON admin_audit
BEGIN
    SELECT RAISE(ABORT, 'admin_audit is append-only');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER admin_audit_no_delete BEFORE DELETE ON admin_audit
BEGIN
    SELECT RAISE(ABORT, 'admin_audit is append-only');
END;
-- +goose StatementEnd

CREATE TABLE console_session (
    token_hash  TEXT     NOT NULL PRIMARY KEY,
    operator    TEXT     NOT NULL,
    csrf_token  TEXT     NOT NULL,
    time_zone   TEXT     NOT NULL DEFAULT 'Asia/Shanghai',
    expires_at  DATETIME NOT NULL,
    create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX idx_console_session_expires_at ON console_session (expires_at);

ALTER TABLE oms_refund ADD COLUMN resolved_by TEXT NULL;
ALTER TABLE oms_refund ADD COLUMN resolved_time DATETIME NULL;
ALTER TABLE oms_refund ADD COLUMN resolution TEXT NOT NULL DEFAULT '';

CREATE INDEX idx_oms_order_payment_state_create_time ON oms_order_payment (state, create_time);
CREATE INDEX idx_oms_order_payment_create_time ON oms_order_payment (create_time);
CREATE INDEX idx_oms_order_payment_out_trade_no ON oms_order_payment (out_trade_no);
CREATE INDEX idx_oms_order_member_id ON oms_order (member_id, id);
CREATE INDEX idx_outbox_aggregate_id ON outbox (aggregate_id);
CREATE INDEX idx_oms_refund_state_update_time ON oms_refund (state, update_time);

-- +goose Down
DROP INDEX idx_oms_refund_state_update_time;
DROP INDEX idx_outbox_aggregate_id;
DROP INDEX idx_oms_order_member_id;
DROP INDEX idx_oms_order_payment_out_trade_no;
DROP INDEX idx_oms_order_payment_create_time;
DROP INDEX idx_oms_order_payment_state_create_time;
ALTER TABLE oms_refund DROP COLUMN resolution;
ALTER TABLE oms_refund DROP COLUMN resolved_time;
ALTER TABLE oms_refund DROP COLUMN resolved_by;
DROP TABLE console_session;
DROP TABLE admin_audit;
