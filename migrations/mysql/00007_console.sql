-- +goose Up
-- The operator console: who did what (append-only), who is signed in, how
-- a refund an operator settled by hand was resolved, and the indexes its
-- pages need to stay fast on a large ledger.
CREATE TABLE admin_audit (
    id           BIGINT       NOT NULL AUTO_INCREMENT,
    -- The form's one-time key: posting the same form twice does it once.
    action_key   VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    operator     VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    action       VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id     BIGINT       NULL,
    -- What the action touched: a payment's trade_no, a refund's
    -- out_request_no, an outbox row's id, a reconciliation item's id.
    target_kind  VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    target_id    VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    before_state VARCHAR(200) NOT NULL DEFAULT '',
    after_state  VARCHAR(200) NOT NULL DEFAULT '',
    note         VARCHAR(500) NOT NULL DEFAULT '',
    create_time  DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_admin_audit_action_key (action_key),
    KEY idx_admin_audit_order_id (order_id),
    KEY idx_admin_audit_target (target_kind, target_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Append-only, even for a bug or a hand-written UPDATE.
CREATE TRIGGER admin_audit_no_update BEFORE UPDATE ON admin_audit FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'admin_audit is append-only';
CREATE TRIGGER admin_audit_no_delete BEFORE DELETE ON admin_audit FOR EACH ROW
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'admin_audit is append-only';

-- Signed-in operators. The cookie holds a random token; only its SHA-256
-- is stored, so a copy of this table signs nobody in.
CREATE TABLE console_session (
    token_hash  CHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    operator    VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    csrf_token  CHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    time_zone   VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'Asia/Shanghai',
    expires_at  DATETIME(3)  NOT NULL,
    create_time DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (token_hash),
    KEY idx_console_session_expires_at (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- A failed refund an operator settled outside the worker (or decided to
-- leave) leaves the queue with its note.
ALTER TABLE oms_refund
    ADD COLUMN resolved_by   VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD COLUMN resolved_time DATETIME(3)  NULL,
    ADD COLUMN resolution    VARCHAR(500) NOT NULL DEFAULT '';

-- Console reads: the overview's time windows, search by member and by
-- out_trade_no, a timeline's events, queues of payments by state.
ALTER TABLE oms_order_payment
    ADD KEY idx_oms_order_payment_state_create_time (state, create_time),
    ADD KEY idx_oms_order_payment_create_time (create_time),
    ADD KEY idx_oms_order_payment_out_trade_no (out_trade_no);
ALTER TABLE oms_order
    ADD KEY idx_oms_order_member_id (member_id, id);
ALTER TABLE outbox
    ADD KEY idx_outbox_aggregate_id (aggregate_id);
ALTER TABLE oms_refund
    ADD KEY idx_oms_refund_state_update_time (state, update_time);

-- +goose Down
ALTER TABLE oms_refund DROP KEY idx_oms_refund_state_update_time;
ALTER TABLE outbox DROP KEY idx_outbox_aggregate_id;
ALTER TABLE oms_order
    DROP KEY idx_oms_order_member_id;
ALTER TABLE oms_order_payment
    DROP KEY idx_oms_order_payment_out_trade_no,
    DROP KEY idx_oms_order_payment_create_time,
    DROP KEY idx_oms_order_payment_state_create_time;
ALTER TABLE oms_refund
    DROP COLUMN resolution,
    DROP COLUMN resolved_time,
    DROP COLUMN resolved_by;
DROP TABLE console_session;
DROP TABLE admin_audit;
