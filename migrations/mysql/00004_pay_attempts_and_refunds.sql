-- +goose Up
-- Each Alipay trade opened for an order. The first attempt's out_trade_no
-- is the order_sn; a new attempt exists only after the previous trade is
-- closed. UNIQUE (order_id, attempt_no) is the final arbiter of "one
-- attempt at a time", whatever the in-process and Redis guards did.
CREATE TABLE oms_pay_attempt (
    id            BIGINT        NOT NULL AUTO_INCREMENT,
    order_id      BIGINT        NOT NULL,
    attempt_no    INT           NOT NULL,
    out_trade_no  VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    method        VARCHAR(8)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    amount        DECIMAL(18,2) NOT NULL,
    state         VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'OPEN',
    pay_url       TEXT          NULL,
    queries       INT           NOT NULL DEFAULT 0,
    next_query_at DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    -- Alipay refuses payment after this (time_expire); until then even a
    -- closed attempt is queried, since "closed" may have been "not yet
    -- opened" (a page trade exists only once the buyer opens the URL).
    expire_at     DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    create_time   DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    update_time   DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_oms_pay_attempt_order_attempt (order_id, attempt_no),
    UNIQUE KEY uk_oms_pay_attempt_out_trade_no (out_trade_no),
    KEY idx_oms_pay_attempt_state_next_query (state, next_query_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Money on its way back. out_request_no is derived from what is refunded
-- (the ledger row, or the after-sale request), so a retry never refunds
-- twice: Alipay refunds an out_request_no once.
CREATE TABLE oms_refund (
    out_request_no  VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind            VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    provider        VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    trade_no        VARCHAR(128)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    out_trade_no    VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id        BIGINT        NOT NULL,
    amount          DECIMAL(18,2) NOT NULL,
    reason          VARCHAR(200)  NOT NULL DEFAULT '',
    state           VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'REFUNDING',
    attempts        INT           NOT NULL DEFAULT 0,
    next_attempt_at DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    last_error      VARCHAR(500)  NOT NULL DEFAULT '',
    idempotency_key VARCHAR(64)   CHARACTER SET ascii COLLATE ascii_bin NULL,
    create_time     DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    update_time     DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (out_request_no),
    UNIQUE KEY uk_oms_refund_order_key (order_id, idempotency_key),
    KEY idx_oms_refund_state_next_attempt (state, next_attempt_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
DROP TABLE oms_refund;
DROP TABLE oms_pay_attempt;
