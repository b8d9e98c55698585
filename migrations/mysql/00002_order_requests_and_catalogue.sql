-- +goose Up
-- What an order needs beyond its payment: the idempotency record of each
-- client request, and the mall's catalogue, member and coupon data. The
-- CHECKs make overselling and negative points impossible even for a bug.
CREATE TABLE oms_order_request (
    member_id       BIGINT       NOT NULL,
    idempotency_key VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    request_hash    CHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id        BIGINT       NULL,
    state           VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'PROCESSING',
    response_status INT          NOT NULL DEFAULT 0,
    response        TEXT         NULL,
    create_time     DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    update_time     DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (member_id, idempotency_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE pms_sku_stock (
    id          BIGINT        NOT NULL AUTO_INCREMENT,
    sku_code    VARCHAR(64)   NOT NULL DEFAULT '',
    name        VARCHAR(200)  NOT NULL DEFAULT '',
    price       DECIMAL(18,2) NOT NULL DEFAULT 0,
    stock       INT           NOT NULL DEFAULT 0,
    lock_stock  INT           NOT NULL DEFAULT 0,
    create_time DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    modify_time DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    CONSTRAINT ck_pms_sku_stock_reserved CHECK (lock_stock >= 0 AND lock_stock <= stock)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE ums_member (
    id          BIGINT       NOT NULL AUTO_INCREMENT,
    username    VARCHAR(64)  NOT NULL DEFAULT '',
    integration INT          NOT NULL DEFAULT 0,
    create_time DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    modify_time DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    CONSTRAINT ck_ums_member_integration CHECK (integration >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE sms_coupon_history (
    id          BIGINT        NOT NULL AUTO_INCREMENT,
    member_id   BIGINT        NOT NULL,
    amount      DECIMAL(18,2) NOT NULL DEFAULT 0,
    use_status  INT           NOT NULL DEFAULT 0,
    use_time    DATETIME      NULL,
    order_id    BIGINT        NULL,
    create_time DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    KEY idx_sms_coupon_history_member_id (member_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE oms_order_item (
    id               BIGINT        NOT NULL AUTO_INCREMENT,
    order_id         BIGINT        NOT NULL,
    order_sn         VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    product_sku_id   BIGINT        NOT NULL,
    product_quantity INT           NOT NULL,
    product_price    DECIMAL(18,2) NOT NULL DEFAULT 0,
    PRIMARY KEY (id),
    KEY idx_oms_order_item_order_id (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- What the order spent, so a cancel gives back exactly that.
ALTER TABLE oms_order
    ADD COLUMN total_amount       DECIMAL(18,2) NOT NULL DEFAULT 0,
    ADD COLUMN coupon_id          BIGINT        NULL,
    ADD COLUMN coupon_amount      DECIMAL(18,2) NOT NULL DEFAULT 0,
    ADD COLUMN integration        INT           NOT NULL DEFAULT 0,
    ADD COLUMN integration_amount DECIMAL(18,2) NOT NULL DEFAULT 0,
    -- The stock this order holds reserved, "sku:qty,sku:qty" in ascending
    -- sku: what paying sells and closing releases, without reading the lines.
    ADD COLUMN stock_reservation  VARCHAR(2000) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    ADD KEY idx_oms_order_status_create_time (status, create_time);

-- +goose Down
ALTER TABLE oms_order
    DROP KEY idx_oms_order_status_create_time,
    DROP COLUMN stock_reservation,
    DROP COLUMN integration_amount,
    DROP COLUMN integration,
    DROP COLUMN coupon_amount,
    DROP COLUMN coupon_id,
    DROP COLUMN total_amount;
DROP TABLE oms_order_item;
DROP TABLE sms_coupon_history;
DROP TABLE ums_member;
DROP TABLE pms_sku_stock;
DROP TABLE oms_order_request;
