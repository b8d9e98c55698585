-- +goose Up
-- The SQLite twin of mysql/00006. SQLite cannot make a column nullable in
-- place: oms_order_payment and oms_refund are rebuilt, columns in the
-- same order, then their indexes.
CREATE TABLE oms_order_payment_new (
    provider      TEXT     NOT NULL,
    trade_no      TEXT     NOT NULL,
    order_id      INTEGER  NULL,
    out_trade_no  TEXT     NOT NULL,
    amount        TEXT     NOT NULL,
    state         TEXT     NOT NULL DEFAULT 'RECEIVED',
    reason        TEXT     NOT NULL DEFAULT '',
    notify_id     TEXT     NOT NULL DEFAULT '',
    paid_at       DATETIME NULL,
    create_time   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    refund_key    TEXT     NULL,
    PRIMARY KEY (provider, trade_no)
);
INSERT INTO oms_order_payment_new (provider, trade_no, order_id, out_trade_no, amount, state, reason, notify_id, paid_at, create_time, update_time)
    SELECT provider, trade_no, order_id, out_trade_no, amount, state, reason, notify_id, paid_at, create_time, update_time FROM oms_order_payment;
DROP TABLE oms_order_payment;
ALTER TABLE oms_order_payment_new RENAME TO oms_order_payment;
CREATE INDEX idx_oms_order_payment_order_id ON oms_order_payment (order_id);
CREATE INDEX idx_oms_order_payment_paid_at ON oms_order_payment (provider, paid_at);

CREATE TABLE oms_refund_new (
    out_request_no  TEXT     NOT NULL PRIMARY KEY,
    kind            TEXT     NOT NULL,
    provider        TEXT     NOT NULL,
    trade_no        TEXT     NOT NULL,
    out_trade_no    TEXT     NOT NULL,
    order_id        INTEGER  NULL,
    amount          TEXT     NOT NULL,
    reason          TEXT     NOT NULL DEFAULT '',
    state           TEXT     NOT NULL DEFAULT 'REFUNDING',
    attempts        INTEGER  NOT NULL DEFAULT 0,
    next_attempt_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    last_error      TEXT     NOT NULL DEFAULT '',
    idempotency_key TEXT     NULL,
    create_time     DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time     DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
INSERT INTO oms_refund_new SELECT out_request_no, kind, provider, trade_no, out_trade_no, order_id, amount, reason, state,
    attempts, next_attempt_at, last_error, idempotency_key, create_time, update_time FROM oms_refund;
DROP TABLE oms_refund;
ALTER TABLE oms_refund_new RENAME TO oms_refund;
CREATE UNIQUE INDEX uk_oms_refund_order_key ON oms_refund (order_id, idempotency_key);
CREATE INDEX idx_oms_refund_state_next_attempt ON oms_refund (state, next_attempt_at);
CREATE INDEX idx_oms_refund_trade_no ON oms_refund (provider, trade_no);

CREATE TABLE recon_run (
    id                    INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    provider              TEXT     NOT NULL,
    bill_date             TEXT     NOT NULL,
    state                 TEXT     NOT NULL,
    attempts              INTEGER  NOT NULL DEFAULT 0,
    owner                 TEXT     NOT NULL DEFAULT '',
    lease_until           DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    started_at            DATETIME NULL,
    finished_at           DATETIME NULL,
    error                 TEXT     NOT NULL DEFAULT '',
    bill_payments         INTEGER  NOT NULL DEFAULT 0,
    bill_payment_amount   TEXT     NOT NULL DEFAULT '0.00',
    bill_refunds          INTEGER  NOT NULL DEFAULT 0,
    bill_refund_amount    TEXT     NOT NULL DEFAULT '0.00',
    bill_fees             TEXT     NOT NULL DEFAULT '0.00',
    ledger_payments       INTEGER  NOT NULL DEFAULT 0,
    ledger_payment_amount TEXT     NOT NULL DEFAULT '0.00',
    ledger_refunds        INTEGER  NOT NULL DEFAULT 0,
    ledger_refund_amount  TEXT     NOT NULL DEFAULT '0.00',
    create_time           DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time           DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX uk_recon_run_provider_date ON recon_run (provider, bill_date);
CREATE INDEX idx_recon_run_state ON recon_run (state, bill_date);

CREATE TABLE recon_attempt (
    id          INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id      INTEGER  NOT NULL,
    attempt_no  INTEGER  NOT NULL,
    owner       TEXT     NOT NULL,
    state       TEXT     NOT NULL,
    error       TEXT     NOT NULL DEFAULT '',
    items       INTEGER  NOT NULL DEFAULT 0,
    repaired    INTEGER  NOT NULL DEFAULT 0,
    started_at  DATETIME NOT NULL,
    finished_at DATETIME NULL
);
CREATE UNIQUE INDEX uk_recon_attempt_run_no ON recon_attempt (run_id, attempt_no);

CREATE TABLE recon_item (
    id             INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id         INTEGER  NOT NULL,
    attempt_no     INTEGER  NOT NULL,
    outcome        TEXT     NOT NULL,
    ref            TEXT     NOT NULL,
    trade_no       TEXT     NOT NULL DEFAULT '',
    out_trade_no   TEXT     NOT NULL DEFAULT '',
    out_request_no TEXT     NOT NULL DEFAULT '',
    bill_amount    TEXT     NULL,
    ledger_amount  TEXT     NULL,
    detail         TEXT     NOT NULL DEFAULT '',
    resolved_at    DATETIME NULL,
    resolved_by    TEXT     NOT NULL DEFAULT '',
    note           TEXT     NOT NULL DEFAULT '',
    create_time    DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time    DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX uk_recon_item_run_outcome_ref ON recon_item (run_id, outcome, ref);

CREATE TABLE recon_seen (
    provider    TEXT     NOT NULL,
    kind        TEXT     NOT NULL,
    ref         TEXT     NOT NULL,
    bill_date   TEXT     NOT NULL,
    trade_no    TEXT     NOT NULL,
    amount      TEXT     NOT NULL,
    fee         TEXT     NOT NULL,
    create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (provider, kind, ref)
);

-- +goose Down
DROP TABLE recon_seen;
DROP TABLE recon_item;
DROP TABLE recon_attempt;
DROP TABLE recon_run;
-- order_id stays nullable: SQLite would need the rebuild again.
DROP INDEX idx_oms_refund_trade_no;
DROP INDEX idx_oms_order_payment_paid_at;
ALTER TABLE oms_order_payment DROP COLUMN refund_key;
