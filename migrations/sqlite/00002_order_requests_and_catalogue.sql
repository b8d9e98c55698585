-- +goose Up
-- The SQLite twin of mysql/00002 (money as TEXT, see 00001).
CREATE TABLE oms_order_request (
    member_id       INTEGER  NOT NULL,
    idempotency_key TEXT     NOT NULL,
    request_hash    TEXT     NOT NULL,
    order_id        INTEGER  NULL,
    state           TEXT     NOT NULL DEFAULT 'PROCESSING',
    response_status INTEGER  NOT NULL DEFAULT 0,
    response        TEXT     NULL,
    create_time     DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time     DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (member_id, idempotency_key)
);

CREATE TABLE pms_sku_stock (
    id          INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    sku_code    TEXT     NOT NULL DEFAULT '',
    name        TEXT     NOT NULL DEFAULT '',
    price       TEXT     NOT NULL DEFAULT '0.00',
    stock       INTEGER  NOT NULL DEFAULT 0,
    lock_stock  INTEGER  NOT NULL DEFAULT 0,
    create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    modify_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT ck_pms_sku_stock_reserved CHECK (lock_stock >= 0 AND lock_stock <= stock)
);

CREATE TABLE ums_member (
    id          INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    username    TEXT     NOT NULL DEFAULT '',
    integration INTEGER  NOT NULL DEFAULT 0,
    create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    modify_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT ck_ums_member_integration CHECK (integration >= 0)
);

CREATE TABLE sms_coupon_history (
    id          INTEGER  NOT NULL PRIMARY KEY AUTOINCREMENT,
    member_id   INTEGER  NOT NULL,
    amount      TEXT     NOT NULL DEFAULT '0.00',
    use_status  INTEGER  NOT NULL DEFAULT 0,
    use_time    DATETIME NULL,
    order_id    INTEGER  NULL,
    create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX idx_sms_coupon_history_member_id ON sms_coupon_history (member_id);

CREATE TABLE oms_order_item (
    id               INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    order_id         INTEGER NOT NULL,
    order_sn         TEXT    NOT NULL DEFAULT '',
    product_sku_id   INTEGER NOT NULL,
    product_quantity INTEGER NOT NULL,
    product_price    TEXT    NOT NULL DEFAULT '0.00'
);
CREATE INDEX idx_oms_order_item_order_id ON oms_order_item (order_id);

ALTER TABLE oms_order ADD COLUMN total_amount       TEXT    NOT NULL DEFAULT '0.00';
ALTER TABLE oms_order ADD COLUMN coupon_id          INTEGER NULL;
ALTER TABLE oms_order ADD COLUMN coupon_amount      TEXT    NOT NULL DEFAULT '0.00';
ALTER TABLE oms_order ADD COLUMN integration        INTEGER NOT NULL DEFAULT 0;
ALTER TABLE oms_order ADD COLUMN integration_amount TEXT    NOT NULL DEFAULT '0.00';
ALTER TABLE oms_order ADD COLUMN stock_reservation  TEXT    NOT NULL DEFAULT '';
CREATE INDEX idx_oms_order_status_create_time ON oms_order (status, create_time);

-- +goose Down
DROP INDEX idx_oms_order_status_create_time;
ALTER TABLE oms_order DROP COLUMN stock_reservation;
ALTER TABLE oms_order DROP COLUMN integration_amount;
ALTER TABLE oms_order DROP COLUMN integration;
ALTER TABLE oms_order DROP COLUMN coupon_amount;
ALTER TABLE oms_order DROP COLUMN coupon_id;
ALTER TABLE oms_order DROP COLUMN total_amount;
DROP TABLE oms_order_item;
DROP TABLE sms_coupon_history;
DROP TABLE ums_member;
DROP TABLE pms_sku_stock;
DROP TABLE oms_order_request;
