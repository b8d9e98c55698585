-- +goose Up
-- The SQLite twin of mysql/00004.
CREATE TABLE oms_pay_attempt (
    id            INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    order_id      INTEGER  NOT NULL,
    attempt_no    INTEGER  NOT NULL,
    out_trade_no  TEXT     NOT NULL,
    method        TEXT     NOT NULL,
    amount        TEXT     NOT NULL,
    state         TEXT     NOT NULL DEFAULT 'OPEN',
    pay_url       TEXT     NULL,
    queries       INTEGER  NOT NULL DEFAULT 0,
    next_query_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    expire_at     DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    create_time   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX uk_oms_pay_attempt_order_attempt ON oms_pay_attempt (order_id, attempt_no);
CREATE UNIQUE INDEX uk_oms_pay_attempt_out_trade_no ON oms_pay_attempt (out_trade_no);
CREATE INDEX idx_oms_pay_attempt_state_next_query ON oms_pay_attempt (state, next_query_at);

CREATE TABLE oms_refund (
    out_request_no  TEXT     NOT NULL PRIMARY KEY,
    kind            TEXT     NOT NULL,
    provider        TEXT     NOT NULL,
    trade_no        TEXT     NOT NULL,
    out_trade_no    TEXT     NOT NULL,
    order_id        INTEGER  NOT NULL,
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
CREATE UNIQUE INDEX uk_oms_refund_order_key ON oms_refund (order_id, idempotency_key);
CREATE INDEX idx_oms_refund_state_next_attempt ON oms_refund (state, next_attempt_at);

-- +goose Down
DROP TABLE oms_refund;
DROP TABLE oms_pay_attempt;
