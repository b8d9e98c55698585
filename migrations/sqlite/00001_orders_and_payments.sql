-- +goose Up
-- The SQLite twin of mysql/00001. Money is TEXT ("100.00"): SQLite's
-- NUMERIC affinity would store it as a float. TEXT compares byte for byte,
-- like ascii_bin.
CREATE TABLE oms_order (
    id            INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    order_sn      TEXT     NOT NULL,
    member_id     INTEGER  NOT NULL,
    pay_amount    TEXT     NOT NULL,
    status        INTEGER  NOT NULL DEFAULT 0,
    pay_type      INTEGER  NOT NULL DEFAULT 0,
    payment_time  DATETIME NULL,
    delete_status INTEGER  NOT NULL DEFAULT 0,
    create_time   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    modify_time   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE UNIQUE INDEX uk_oms_order_order_sn ON oms_order (order_sn);

CREATE TABLE oms_order_payment (
    provider      TEXT     NOT NULL,
    trade_no      TEXT     NOT NULL,
    order_id      INTEGER  NOT NULL,
    out_trade_no  TEXT     NOT NULL,
    amount        TEXT     NOT NULL,
    state         TEXT     NOT NULL DEFAULT 'RECEIVED',
    reason        TEXT     NOT NULL DEFAULT '',
    notify_id     TEXT     NOT NULL DEFAULT '',
    paid_at       DATETIME NULL,
    create_time   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (provider, trade_no)
);
CREATE INDEX idx_oms_order_payment_order_id ON oms_order_payment (order_id);

-- +goose Down
DROP TABLE oms_order_payment;
DROP TABLE oms_order;
