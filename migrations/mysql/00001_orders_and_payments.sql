-- +goose Up
-- Orders, with the codes and names of the mall schema this service replaces.
-- Identifiers that Alipay echoes back are ASCII and compared byte for byte.
CREATE TABLE oms_order (
    id            BIGINT        NOT NULL AUTO_INCREMENT,
    order_sn      VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    member_id     BIGINT        NOT NULL,
    pay_amount    DECIMAL(18,2) NOT NULL,
    status        INT           NOT NULL DEFAULT 0,
    pay_type      INT           NOT NULL DEFAULT 0,
    payment_time  DATETIME      NULL,
    delete_status INT           NOT NULL DEFAULT 0,
    create_time   DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    modify_time   DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_oms_order_order_sn (order_sn)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The payment ledger: one row per real movement of money.
CREATE TABLE oms_order_payment (
    provider      VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    trade_no      VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id      BIGINT        NOT NULL,
    out_trade_no  VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    amount        DECIMAL(18,2) NOT NULL,
    state         VARCHAR(20)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'RECEIVED',
    reason        VARCHAR(32)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    notify_id     VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    paid_at       DATETIME      NULL,
    create_time   DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    update_time   DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (provider, trade_no),
    KEY idx_oms_order_payment_order_id (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE oms_order_payment;
DROP TABLE oms_order;
